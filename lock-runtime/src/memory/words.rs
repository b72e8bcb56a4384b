//! [`Words`]: the keys or the arguments of a script call, in one buffer.
//!
//! Every lock operation writes a script call; keeping its words in one
//! string costs one allocation, where a string per word cost one each.
//! Their ends are kept beside it, the first few inline: a lock call's
//! keys and arguments need no second allocation (a batch of renewals
//! does).

use crate::owner::LineId;

/// A list of words, appended one by one, read by index.
#[derive(Clone, Debug, Default)]
pub(crate) struct Words {
    text: String,
    ends: Ends,
}

impl Words {
    /// Room for `words` words of `bytes` bytes together, before it grows.
    pub(crate) fn with_capacity(words: usize, bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
            ends: Ends::with_capacity(words),
        }
    }

    /// Appends `word`.
    pub(crate) fn push(&mut self, word: impl Word) {
        word.append_to(&mut self.text);
        self.ends.push(self.text.len());
    }

    /// The `index`th word (from 0).
    pub(crate) fn get(&self, index: usize) -> Option<&str> {
        let end = self.ends.get(index)?;
        let start = match index.checked_sub(1) {
            Some(before) => self.ends.get(before)?,
            None => 0,
        };
        self.text.get(start..end)
    }

    /// How many words there are.
    pub(crate) fn len(&self) -> usize {
        self.ends.len
    }

    /// The words in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).filter_map(|index| self.get(index))
    }

    /// The length of all words together.
    pub(crate) fn text_len(&self) -> usize {
        self.text.len()
    }
}

/// How many word ends [`Ends`] keeps inline: more than a lock call's keys
/// or arguments (the plain acquire sends seven words, the fair lock's
/// try eight).
const INLINE_ENDS: usize = 8;

/// Where each word ends in the text: the first [`INLINE_ENDS`] inline,
/// the rest in a vector.
#[derive(Clone, Debug, Default)]
struct Ends {
    len: usize,
    inline: [usize; INLINE_ENDS],
    more: Vec<usize>,
}

impl Ends {
    fn with_capacity(ends: usize) -> Self {
        Self {
            more: Vec::with_capacity(ends.saturating_sub(INLINE_ENDS)),
            ..Self::default()
        }
    }

    fn push(&mut self, end: usize) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = end,
            None => self.more.push(end),
        }
        self.len += 1;
    }

    fn get(&self, index: usize) -> Option<usize> {
        if index >= self.len {
            return None;
        }
        match index.checked_sub(INLINE_ENDS) {
            None => self.inline.get(index).copied(),
            Some(spilled) => self.more.get(spilled).copied(),
        }
    }
}

/// What a word can be: text, a number, or a type of the lock's own that
/// writes itself as it displays. Written without `fmt`'s machinery, which
/// cost more than the rest of pushing a word: every lock call writes
/// several.
pub(crate) trait Word {
    /// Appends the word to `text`.
    fn append_to(&self, text: &mut String);
}

impl Word for str {
    fn append_to(&self, text: &mut String) {
        text.push_str(self);
    }
}

impl Word for String {
    fn append_to(&self, text: &mut String) {
        text.push_str(self);
    }
}

impl<W: Word + ?Sized> Word for &W {
    fn append_to(&self, text: &mut String) {
        (**self).append_to(text);
    }
}

/// Integers, in decimal.
macro_rules! integer_words {
    ($($integer:ty),*) => {$(
        impl Word for $integer {
            fn append_to(&self, text: &mut String) {
                text.push_str(itoa::Buffer::new().format(*self));
            }
        }
    )*};
}

integer_words!(u8, u16, u32, u64, u128, usize, i32, i64);

/// A line, as it displays.
impl Word for LineId {
    fn append_to(&self, text: &mut String) {
        text.extend(self.hex_digits().map(char::from));
    }
}

impl<W: Word> FromIterator<W> for Words {
    fn from_iter<I: IntoIterator<Item = W>>(words: I) -> Self {
        let mut all = Self::default();
        for word in words {
            all.push(word);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_read_back_as_written_even_empty_ones() {
        let mut words = Words::default();
        words.push("lock:{a}");
        words.push("");
        words.push(1500_u64);
        words.push(-7_i64);
        words.push(u128::MAX);
        assert_eq!(words.len(), 5);
        assert_eq!(words.get(0), Some("lock:{a}"));
        assert_eq!(words.get(1), Some(""));
        assert_eq!(words.get(2), Some("1500"));
        assert_eq!(words.get(5), None);
        assert_eq!(
            words.iter().collect::<Vec<_>>(),
            ["lock:{a}", "", "1500", "-7", &u128::MAX.to_string()]
        );
        assert_eq!(words.text_len(), 14 + u128::MAX.to_string().len());
    }

    #[test]
    fn words_past_the_inline_ends_read_back_too() {
        let mut words = Words::with_capacity(2, 8);
        let written: Vec<String> = (0..INLINE_ENDS * 3).map(|n| format!("w{n}")).collect();
        for word in &written {
            words.push(word.as_str());
        }
        assert_eq!(words.len(), written.len());
        assert_eq!(words.iter().collect::<Vec<_>>(), written);
        assert_eq!(
            words.get(INLINE_ENDS - 1),
            Some(written[INLINE_ENDS - 1].as_str())
        );
        assert_eq!(words.get(INLINE_ENDS), Some(written[INLINE_ENDS].as_str()));
        assert_eq!(words.get(written.len()), None);
    }

    #[test]
    fn no_words() {
        let words = Words::default();
        assert_eq!(words.len(), 0);
        assert_eq!(words.get(0), None);
        assert_eq!(words.iter().count(), 0);
    }
}

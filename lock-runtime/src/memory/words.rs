//! [`Words`]: the keys or the arguments of a script call, in one buffer.
//!
//! Every lock operation writes a script call; keeping its words in one
//! string (and their ends in one vector) costs two allocations, where a
//! string per word cost one each.

use std::fmt::{Display, Write};

/// A list of words, appended one by one, read by index.
#[derive(Clone, Debug, Default)]
pub(crate) struct Words {
    text: String,
    ends: Vec<usize>,
}

impl Words {
    /// Room for `words` words of `bytes` bytes together, before it grows.
    pub(crate) fn with_capacity(words: usize, bytes: usize) -> Self {
        Self {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(words),
        }
    }

    /// Appends `word`, as it displays.
    pub(crate) fn push(&mut self, word: impl Display) {
        // Writing to a `String` cannot fail.
        let _ = write!(self.text, "{word}");
        self.ends.push(self.text.len());
    }

    /// The `index`th word (from 0).
    pub(crate) fn get(&self, index: usize) -> Option<&str> {
        let end = *self.ends.get(index)?;
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        Some(&self.text[start..end])
    }

    /// How many words there are.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
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

impl<W: Display> FromIterator<W> for Words {
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
        assert_eq!(words.len(), 3);
        assert_eq!(words.get(0), Some("lock:{a}"));
        assert_eq!(words.get(1), Some(""));
        assert_eq!(words.get(2), Some("1500"));
        assert_eq!(words.get(3), None);
        assert_eq!(words.iter().collect::<Vec<_>>(), ["lock:{a}", "", "1500"]);
        assert_eq!(words.text_len(), "lock:{a}1500".len());
    }

    #[test]
    fn no_words() {
        let words = Words::default();
        assert_eq!(words.len(), 0);
        assert_eq!(words.get(0), None);
        assert_eq!(words.iter().count(), 0);
    }
}

//! [`Flags`]: the `--name value` command lines of the examples.
//!
//! A dozen lines instead of a command-line crate: the examples should show
//! the lock, not argument parsing, and keep the dependency list short.

use std::collections::HashMap;
use std::time::Duration;

/// The `--name value` pairs of a command line, each name checked against
/// the ones the program knows, so that a typo is an error rather than a
/// silently ignored flag.
///
/// ```
/// use lock_examples::Flags;
///
/// let args = ["--stock", "50", "--mode", "none"].map(String::from);
/// let flags = Flags::parse(args, &["stock", "mode", "buyers"])?;
/// assert_eq!(flags.number("stock", 100)?, 50);
/// assert_eq!(flags.number("buyers", 200)?, 200);
/// assert_eq!(flags.text("mode"), Some("none"));
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Default)]
pub struct Flags {
    values: HashMap<String, String>,
}

impl Flags {
    /// Reads `args` (without the program name) as `--name value` pairs,
    /// allowing only the names in `known` (given without the dashes).
    pub fn parse(args: impl IntoIterator<Item = String>, known: &[&str]) -> Result<Self, String> {
        let mut values = HashMap::new();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let name = flag
                .strip_prefix("--")
                .filter(|name| known.contains(name))
                .ok_or_else(|| {
                    let list: Vec<String> = known.iter().map(|k| format!("--{k}")).collect();
                    format!(
                        "unknown argument `{flag}`; the flags are {}",
                        list.join(", ")
                    )
                })?;
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            if values.insert(name.to_owned(), value).is_some() {
                return Err(format!("{flag} is given twice"));
            }
        }
        Ok(Self { values })
    }

    /// The value of `--name`, if given.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The value of `--name` as a whole number, or `default` if not given.
    pub fn number(&self, name: &str, default: u64) -> Result<u64, String> {
        self.text(name).map_or(Ok(default), |value| {
            value
                .parse()
                .map_err(|_| format!("--{name}: `{value}` is not a whole number"))
        })
    }

    /// The value of `--name` in whole seconds, or `default` if not given.
    pub fn seconds(&self, name: &str, default: Duration) -> Result<Duration, String> {
        self.text(name).map_or(Ok(default), |_| {
            self.number(name, 0).map(Duration::from_secs)
        })
    }
}

//! [`Setup`]: the Redis deployment a scenario runs against. Most scenarios
//! run on one server; some also run on independent Redlock masters, where
//! only the Redlock implementations (the project and rslock) take part.

use crate::scenarios::{self, PARALLEL_64, UNCONTENDED_PAIR};

/// Masters of the Redlock setup.
pub const REDLOCK_MASTERS: usize = 3;

/// Scenarios that also run on the Redlock setup.
pub const REDLOCK_SCENARIOS: [&str; 2] = [UNCONTENDED_PAIR, PARALLEL_64];

/// One Redis deployment of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setup {
    /// One `redis-server`.
    Single,
    /// `masters` independent `redis-server`s, locked by majority.
    Redlock {
        /// How many masters.
        masters: usize,
    },
}

/// Every setup, in the order they run and are reported.
pub const ALL: [Setup; 2] = [
    Setup::Single,
    Setup::Redlock {
        masters: REDLOCK_MASTERS,
    },
];

impl Setup {
    /// Short name: `single` or `redlock-3`.
    pub fn name(self) -> String {
        match self {
            Self::Single => "single".to_owned(),
            Self::Redlock { masters } => format!("redlock-{masters}"),
        }
    }

    /// Servers the setup needs.
    pub fn servers(self) -> usize {
        match self {
            Self::Single => 1,
            Self::Redlock { masters } => masters,
        }
    }

    /// The scenarios run on this setup, in order.
    pub fn scenarios(self) -> &'static [&'static str] {
        match self {
            Self::Single => &scenarios::ALL,
            Self::Redlock { .. } => &REDLOCK_SCENARIOS,
        }
    }

    /// The name `scenario` goes by on this setup, in `--only`, the table
    /// and the JSON: the bare scenario name on one server (unchanged from
    /// before there were setups), `redlock-3/<scenario>` otherwise.
    pub fn key(self, scenario: &str) -> String {
        match self {
            Self::Single => scenario.to_owned(),
            Self::Redlock { .. } => format!("{}/{scenario}", self.name()),
        }
    }

    /// The project's URL for servers at `urls` (`redis://host:port/`
    /// each): the one server itself, or the `redis+redlock://` list.
    pub fn project_url(self, urls: &[String]) -> String {
        match self {
            Self::Single => urls.first().cloned().unwrap_or_default(),
            Self::Redlock { .. } => {
                let addresses: Vec<&str> = urls.iter().map(|url| address(url)).collect();
                format!("redis+redlock://{}", addresses.join(","))
            }
        }
    }
}

/// The setup and scenario a name (see [`Setup::key`]) stands for.
pub fn of_key(key: &str) -> Option<(Setup, &'static str)> {
    ALL.into_iter().find_map(|setup| {
        let scenario = setup.scenarios().iter().find(|s| setup.key(s) == key)?;
        Some((setup, *scenario))
    })
}

/// Every scenario name of every setup (see [`Setup::key`]), in run order.
pub fn all_keys() -> Vec<String> {
    ALL.iter()
        .flat_map(|setup| setup.scenarios().iter().map(|s| setup.key(s)))
        .collect()
}

/// `host:port` of a `redis://host:port/` URL.
fn address(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keys_and_urls() {
        let redlock = ALL[1];
        assert_eq!(redlock.name(), "redlock-3");
        assert_eq!(redlock.key(PARALLEL_64), "redlock-3/parallel_64");
        assert_eq!(Setup::Single.key(PARALLEL_64), "parallel_64");
        let urls: Vec<String> = [7001, 7002, 7003]
            .iter()
            .map(|port| format!("redis://127.0.0.1:{port}/"))
            .collect();
        assert_eq!(
            redlock.project_url(&urls),
            "redis+redlock://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
        );
        assert_eq!(Setup::Single.project_url(&urls[..1]), urls[0]);
        let keys = all_keys();
        assert_eq!(keys.len(), scenarios::ALL.len() + REDLOCK_SCENARIOS.len());
        assert_eq!(
            keys.last().map(String::as_str),
            Some("redlock-3/parallel_64")
        );
    }
}

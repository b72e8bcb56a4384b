//! The printed report: a Markdown table of every scenario (medians, with
//! the spread over the runs) and one of the targets, ready for the README.

use std::fmt::Write as _;

use crate::scenarios::{HANDOFF, WATCHDOG_SCALE};
use crate::setup::{self, Setup};
use crate::targets::{RoundTrips, Target};
use crate::{Results, Summary};

/// The results table; `rtt` expresses handoff gaps in round trips. Where
/// a scenario meters its cost, each row also shows the server's CPU, this
/// process's CPU and the server's commands (scripts' inner calls counted)
/// per operation: they move far less than throughput on a noisy machine.
pub fn results_table(results: &Results, rtt: RoundTrips) -> String {
    let mut out = String::new();
    out.push_str(
        "| scenario | impl | ops/s | ± | p50 µs | p99 µs | server µs/op | client µs/op | cmds/op | runs | notes |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for scenario in results.scenario_names() {
        for implementation in results.implementation_names(scenario) {
            let Some(summary) = results.summary(scenario, implementation) else {
                continue;
            };
            let _ = writeln!(
                out,
                "| {scenario} | {implementation} | {} | {:.1}% | {} | {} | {} | {} | {} | {} | {} |",
                number(summary.ops_per_s.median),
                summary.ops_per_s.spread() * 100.0,
                number(summary.p50_us.median),
                number(summary.p99_us.median),
                number(summary.extra("redis_cpu_us_per_op")),
                number(summary.extra("client_cpu_us_per_op")),
                number(summary.extra("redis_cmds_per_op")),
                summary.runs,
                notes(scenario, &summary, rtt),
            );
        }
    }
    out
}

/// The targets table.
pub fn targets_table(targets: &[Target]) -> String {
    let mut out = String::new();
    out.push_str("| | target | measured | goal | met |\n");
    out.push_str("|---|---|---:|---|---|\n");
    for target in targets {
        let met = match target.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None if target.value.is_nan() => "not run",
            None => "",
        };
        // Ratios near 1 need three decimals to be told from their goal.
        let value = if target.value.abs() < 10.0 && target.value != target.value.trunc() {
            format!("{:.3}", target.value)
        } else {
            number(target.value)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {value} | {} | {met} |",
            target.id, target.what, target.goal
        );
    }
    out
}

fn notes(scenario: &str, summary: &Summary, rtt: RoundTrips) -> String {
    if let Some((setup @ Setup::Redlock { masters }, _)) = setup::of_key(scenario) {
        return format!(
            "{}: server columns summed over the {masters} masters",
            setup.name()
        );
    }
    match scenario {
        HANDOFF => format!(
            "p50 = {:.1} idle / {:.1} warm round trips; {} rounds, {} rejected",
            summary.p50_us.median / rtt.idle_us,
            summary.p50_us.median / rtt.warm_us,
            number(summary.extra("rounds")),
            number(summary.extra("rejected_rounds")),
        ),
        WATCHDOG_SCALE => format!(
            "{} locks; per tick: {} renewal rounds, {} renewal cmds ({} per conn); redis {} cmds/s, CPU {}%; client CPU {}%; lost {}",
            number(summary.extra("locks")),
            number(summary.extra("renewal_rounds_per_tick")),
            number(summary.extra("renewal_cmds_per_tick")),
            number(summary.extra("renewal_cmds_per_conn_tick")),
            number(summary.extra("redis_cmds_per_s")),
            number(summary.extra("redis_cpu_pct")),
            number(summary.extra("client_cpu_pct")),
            number(summary.extra.get("lost").map_or(f64::NAN, |s| s.max)),
        ),
        // A multi-key hold whose keys the run placed by slot (the cluster bench).
        _ if summary.extra.contains_key("keys_per_hold") => format!(
            "keys / slots / nodes per hold: {} / {} / {}",
            number(summary.extra("keys_per_hold")),
            number(summary.extra("slots_per_hold")),
            number(summary.extra("nodes_per_hold")),
        ),
        _ => String::new(),
    }
}

/// A number for people: thousands grouped above 1,000, three significant
/// digits below.
pub fn number(value: f64) -> String {
    if value.is_nan() {
        return "–".to_owned();
    }
    let magnitude = value.abs();
    if magnitude >= 1_000.0 {
        let digits = format!("{:.0}", magnitude);
        let mut grouped = String::new();
        for (i, digit) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        if value < 0.0 {
            grouped.insert(0, '-');
        }
        grouped
    } else if magnitude >= 100.0 || value == value.trunc() {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(1_234_567.8), "1,234,568");
        assert_eq!(number(123.4), "123");
        assert_eq!(number(12.34), "12.3");
        assert_eq!(number(1.234), "1.23");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(f64::NAN), "–");
    }
}

//! Hand-over gaps of a flash sale: from the end of one critical section to
//! the start of the next, whoever runs it. The gap is what a lock costs
//! per deduction beyond the deduction itself (its release, the next
//! buyer's wake-up and grant), measured on the buyers' side, so it tells
//! apart what throughput alone mixes up: a cheap hand-over inside one
//! process, a dearer one across processes, and how often each happens.

use std::time::Duration;

use crate::Samples;

/// One critical section: when it began and ended (µs since the Unix
/// epoch: the worker processes share the machine's clock), and which
/// worker process ran it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Section {
    /// Start, µs since the epoch.
    pub start_us: u64,
    /// End, µs since the epoch.
    pub end_us: u64,
    /// The worker process (its index in the run).
    pub worker: usize,
}

/// The gaps between consecutive critical sections of one run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gaps {
    /// Median gap when the next section ran in the same process, µs;
    /// None when none did.
    pub within_p50_us: Option<f64>,
    /// Median gap when it ran in the other process, µs; None when none did.
    pub across_p50_us: Option<f64>,
    /// Share of hand-overs that crossed processes.
    pub across_share: f64,
    /// Mean gap over all hand-overs, µs.
    pub mean_us: f64,
}

/// The gaps of `sections` (any order); `None` when fewer than two, or when
/// two overlap: without mutual exclusion there is no hand-over to measure.
pub fn gaps(mut sections: Vec<Section>) -> Option<Gaps> {
    sections.sort_by_key(|section| section.start_us);
    let (mut within, mut across) = (Samples::default(), Samples::default());
    let mut total_us = 0u64;
    for pair in sections.windows(2) {
        let gap_us = pair[1].start_us.checked_sub(pair[0].end_us)?;
        total_us += gap_us;
        let gap = Duration::from_micros(gap_us);
        if pair[0].worker == pair[1].worker {
            within.push(gap);
        } else {
            across.push(gap);
        }
    }
    let handovers = sections.len().checked_sub(1).filter(|&n| n > 0)?;
    Some(Gaps {
        across_share: across.len() as f64 / handovers as f64,
        within_p50_us: median_us(&mut within),
        across_p50_us: median_us(&mut across),
        mean_us: total_us as f64 / handovers as f64,
    })
}

/// The median of `gaps`, if there is any gap.
fn median_us(gaps: &mut Samples) -> Option<f64> {
    (!gaps.is_empty()).then(|| gaps.quantile_us(0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within the 0.1 % to which [`Samples`] keeps a value.
    fn about(value: Option<f64>, expected: f64) -> bool {
        value.is_some_and(|value| (value - expected).abs() <= expected * 0.001)
    }

    fn section(start_us: u64, end_us: u64, worker: usize) -> Section {
        Section {
            start_us,
            end_us,
            worker,
        }
    }

    #[test]
    fn tells_hand_overs_within_a_process_from_those_across() {
        let gaps = gaps(vec![
            section(1_000, 1_100, 1),
            section(0, 100, 0),
            section(110, 200, 0),
            section(210, 300, 0),
            section(700, 800, 1),
        ])
        .unwrap();
        // Within: 10, 10, 200 (800 -> 1,000 in worker 1); across: 400
        // (300 -> 700).
        assert!(about(gaps.within_p50_us, 10.0), "{gaps:?}");
        assert!(about(gaps.across_p50_us, 400.0), "{gaps:?}");
        assert_eq!(gaps.across_share, 0.25);
        assert_eq!(gaps.mean_us, 155.0);
    }

    #[test]
    fn a_run_that_never_crossed_has_no_median_across() {
        let gaps = gaps(vec![section(0, 100, 0), section(150, 200, 0)]).unwrap();
        assert!(about(gaps.within_p50_us, 50.0), "{gaps:?}");
        assert_eq!(gaps.across_p50_us, None);
        assert_eq!(gaps.across_share, 0.0);
    }

    #[test]
    fn overlapping_sections_have_no_hand_overs() {
        assert_eq!(gaps(vec![section(0, 100, 0), section(50, 150, 1)]), None);
        assert_eq!(gaps(vec![section(0, 100, 0)]), None);
    }
}

//! S6, the fair lock's rule (see the [module docs](super)): grants follow
//! the order in which the server saw the waiters arrive.

use super::check::Section;

/// S6: of the sections of `key` granted after waiting in line, taken in
/// the order the server saw them arrive, each carries a higher fence than
/// the one before: a lower fence after a later arrival is a grant that
/// overtook a waiter still in line. (Arrivals the server stamped in the
/// same microsecond are not ordered.)
pub(super) fn check_arrival_order(key: &str, granted: &[&Section], violations: &mut Vec<String>) {
    let mut waited: Vec<(u64, u64, &Section)> = granted
        .iter()
        .filter_map(|s| Some((s.arrival?, s.begin?.0, *s)))
        .collect();
    waited.sort_by_key(|&(arrival, fence, _)| (arrival, fence));
    for pair in waited.windows(2) {
        let [
            (earlier, earlier_fence, first),
            (later, later_fence, second),
        ] = pair
        else {
            continue;
        };
        if earlier < later && earlier_fence >= later_fence {
            violations.push(format!(
                "{key}: {} (fence {later_fence}) arrived at {later}, after {} arrived at \
                 {earlier}, yet was granted first ({} has fence {earlier_fence}): a grant \
                 overtook the line",
                second.sid, first.sid, first.sid
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Mode, Outcome};

    fn granted(sid: &str, fence: u64, arrival: Option<u64>) -> Section {
        Section {
            sid: sid.into(),
            worker: "w1".into(),
            key: "fair-r0".into(),
            mode: Mode::Cancel,
            invoke: 1,
            begin: Some((fence, 10)),
            arrival,
            writes: Vec::new(),
            done: Some(20),
            told: None,
            end: 30,
            outcome: Outcome::Ok,
        }
    }

    fn judge(sections: &[Section]) -> Vec<String> {
        let refs: Vec<&Section> = sections.iter().collect();
        let mut violations = Vec::new();
        check_arrival_order("fair-r0", &refs, &mut violations);
        violations
    }

    #[test]
    fn grants_in_arrival_order_pass() {
        let sections = [
            granted("w1.3", 300, Some(3)),
            granted("w1.1", 100, Some(1)),
            // Taken at its first try: it never waited, nothing to order.
            granted("w1.9", 50, None),
            granted("w1.2", 200, Some(2)),
        ];
        assert!(judge(&sections).is_empty());
    }

    #[test]
    fn s6_a_later_arrival_granted_first_is_caught() {
        let sections = [
            granted("w1.1", 300, Some(1)),
            granted("w1.2", 200, Some(2)),
            granted("w1.3", 400, Some(3)),
        ];
        let violations = judge(&sections);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].contains("w1.2"), "{violations:?}");
        assert!(
            violations[0].contains("overtook the line"),
            "{violations:?}"
        );
    }

    #[test]
    fn s6_is_judged_from_the_recorded_histories() {
        let lines = "invoke w1.1 fair-r0 cancel 100\n\
                     invoke w1.2 fair-r0 cancel 101\n\
                     arrived w1.2 5000 200\n\
                     begin w1.2 70 201\n\
                     done w1.2 210\n\
                     end w1.2 ok 211\n\
                     arrived w1.1 4000 300\n\
                     begin w1.1 90 301\n\
                     done w1.1 310\n\
                     end w1.1 ok 311\n";
        let workers = [crate::history::WorkerHistory::parse("w1", lines)];
        let verdict = crate::history::check(&workers, &[], &Default::default(), 0);
        assert_eq!(verdict.fair_ordered, 2);
        assert_eq!(verdict.violations.len(), 1, "{:?}", verdict.violations);
        assert!(verdict.violations[0].contains("overtook the line"));
    }

    #[test]
    fn arrivals_of_the_same_microsecond_are_not_ordered() {
        let sections = [granted("w1.1", 300, Some(5)), granted("w1.2", 200, Some(5))];
        assert!(judge(&sections).is_empty());
    }
}

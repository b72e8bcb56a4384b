//! The verdict: sections rebuilt from the workers' events, judged by the
//! rules of the [module docs](super) against each other, the driver's faults
//! and the store's log; then counted, so a run that proved nothing fails too.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use super::event::{Event, Mode, Outcome, WorkerHistory};
use super::faults::Fault;
use super::store::StoreEntry;

/// One invoked section, rebuilt from its worker's events. Instants are ns of
/// CLOCK_MONOTONIC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// `<worker>.<seq>`.
    pub sid: String,
    /// The worker whose history holds it.
    pub worker: String,
    /// The resource.
    pub key: String,
    /// What its body does when told of a loss.
    pub mode: Mode,
    /// When the locked function was called.
    pub invoke: u64,
    /// (fence, instant) of its first statement, if the lock was granted.
    pub begin: Option<(u64, u64)>,
    /// When the server first saw it wait in a fair lock's line (µs on the
    /// server's clock), if it was granted one after waiting.
    pub arrival: Option<u64>,
    /// (n, instant) of each fenced write it was about to send, in order.
    pub writes: Vec<(u32, u64)>,
    /// When the body finished its work.
    pub done: Option<u64>,
    /// When it observed its loss signal.
    pub told: Option<u64>,
    /// When the call returned, or when its worker was killed.
    pub end: u64,
    /// How it ended ([`Outcome::Killed`] when its worker was killed first).
    pub outcome: Outcome,
}

impl Section {
    fn fence(&self) -> Option<u64> {
        self.begin.map(|(fence, _)| fence)
    }

    /// The fence for a message (`?` when the section never began).
    fn fence_text(&self) -> String {
        self.fence()
            .map_or_else(|| "?".to_owned(), |f| f.to_string())
    }

    fn began(&self) -> Option<u64> {
        self.begin.map(|(_, t)| t)
    }

    /// Until when the section relied on its lock: its body's end (`done`)
    /// when the body returned, else the end of the call (a body cancelled,
    /// or killed). The call's own end comes after its release, when the
    /// next owner may already have begun.
    fn held_until(&self) -> u64 {
        self.done.unwrap_or(self.end)
    }

    /// Whether the held interval `[begin, held_until)` meets `[from, until)`.
    fn held_over(&self, from: u64, until: u64) -> bool {
        self.began()
            .is_some_and(|began| began < until && from < self.held_until())
    }
}

/// What the checker found: the counts that show the run exercised
/// something, and every broken rule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Sections invoked.
    pub sections: usize,
    /// Sections that began (the library granted the lock).
    pub granted: usize,
    /// Sections that ended `ok` after finishing their body.
    pub completed: usize,
    /// Sections that observed their loss signal.
    pub lost_signals: usize,
    /// Writes the store refused as stale.
    pub stale_refused: usize,
    /// Writes the store accepted.
    pub accepted_writes: usize,
    /// Sections that waited while the previous holder (by fence) held the
    /// key, and began once it had ended.
    pub contended_handoffs: usize,
    /// Worker freezes that overlapped a held section of that worker.
    pub freezes_hit: usize,
    /// Worker kills that landed inside a section of that worker.
    pub kills_hit: usize,
    /// Network cuts that overlapped a held section of that worker.
    pub cuts_hit: usize,
    /// Replies the fault proxy dropped.
    pub dropped_replies: usize,
    /// Server faults (freezes, restarts, failovers, migrations) during
    /// which some section held its lock: a fault between two sections
    /// tests only a reconnection.
    pub server_faults_hit: usize,
    /// Locks passed to the next task of a worker without a server call, by
    /// the workers' own counters (a worker killed mid-run reports none):
    /// their sections are checked like every other.
    pub passed_in_process: usize,
    /// Sections granted a fair lock after waiting in its line: those S6
    /// (arrival order) judged.
    pub fair_ordered: usize,
    /// Every broken rule, in words (empty when the run passed).
    pub violations: Vec<String>,
}

impl Verdict {
    /// Adds `other`'s counts and violations to this one's: the verdict of
    /// two rounds of one run.
    pub fn absorb(&mut self, other: Verdict) {
        self.sections += other.sections;
        self.granted += other.granted;
        self.completed += other.completed;
        self.lost_signals += other.lost_signals;
        self.stale_refused += other.stale_refused;
        self.accepted_writes += other.accepted_writes;
        self.contended_handoffs += other.contended_handoffs;
        self.freezes_hit += other.freezes_hit;
        self.kills_hit += other.kills_hit;
        self.cuts_hit += other.cuts_hit;
        self.dropped_replies += other.dropped_replies;
        self.server_faults_hit += other.server_faults_hit;
        self.passed_in_process += other.passed_in_process;
        self.fair_ordered += other.fair_ordered;
        self.violations.extend(other.violations);
    }

    /// The counts on one line, for the test's output.
    pub fn summary(&self) -> String {
        format!(
            "chaos: sections={} granted={} completed={} handoffs={} told={} stale_refused={} \
             accepted_writes={} freezes_hit={} kills_hit={} cuts_hit={} dropped_replies={} \
             server_faults_hit={} passed_in_process={} fair_ordered={} violations={}",
            self.sections,
            self.granted,
            self.completed,
            self.contended_handoffs,
            self.lost_signals,
            self.stale_refused,
            self.accepted_writes,
            self.freezes_hit,
            self.kills_hit,
            self.cuts_hit,
            self.dropped_replies,
            self.server_faults_hit,
            self.passed_in_process,
            self.fair_ordered,
            self.violations.len(),
        )
    }

    /// One message per count below its minimum: a run without them passes
    /// vacuously.
    pub fn shortfalls(&self, minimums: &Minimums) -> Vec<String> {
        [
            (self.completed, minimums.completed, "completed sections"),
            (
                self.contended_handoffs,
                minimums.handoffs,
                "contended handoffs",
            ),
            (self.lost_signals, minimums.told, "loss signals observed"),
            (
                self.stale_refused,
                minimums.stale_refused,
                "stale writes refused by the store",
            ),
            (
                self.freezes_hit,
                minimums.freezes_hit,
                "freezes that hit a held section",
            ),
            (
                self.kills_hit,
                minimums.kills_hit,
                "kills that hit a section",
            ),
            (
                self.cuts_hit,
                minimums.cuts_hit,
                "cuts that hit a held section",
            ),
            (
                self.dropped_replies,
                minimums.dropped_replies,
                "dropped replies",
            ),
            (
                self.server_faults_hit,
                minimums.server_faults_hit,
                "server faults that hit a held section",
            ),
            (
                self.passed_in_process,
                minimums.passed_in_process,
                "locks passed in process",
            ),
            (
                self.fair_ordered,
                minimums.fair_ordered,
                "fair grants after a wait in line",
            ),
        ]
        .into_iter()
        .filter(|(count, minimum, _)| count < minimum)
        .map(|(count, minimum, what)| {
            format!("only {count} {what}; the run needs at least {minimum} to prove anything")
        })
        .collect()
    }
}

/// The least of each count a run must reach to prove anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Minimums {
    /// [`Verdict::completed`].
    pub completed: usize,
    /// [`Verdict::contended_handoffs`].
    pub handoffs: usize,
    /// [`Verdict::lost_signals`].
    pub told: usize,
    /// [`Verdict::stale_refused`].
    pub stale_refused: usize,
    /// [`Verdict::freezes_hit`].
    pub freezes_hit: usize,
    /// [`Verdict::kills_hit`].
    pub kills_hit: usize,
    /// [`Verdict::cuts_hit`].
    pub cuts_hit: usize,
    /// [`Verdict::dropped_replies`].
    pub dropped_replies: usize,
    /// [`Verdict::server_faults_hit`].
    pub server_faults_hit: usize,
    /// [`Verdict::passed_in_process`].
    pub passed_in_process: usize,
    /// [`Verdict::fair_ordered`].
    pub fair_ordered: usize,
}

/// Judges a run: the workers' histories, the driver's faults, and the
/// store's log per resource (in server order). `grace_ns` is how long after
/// a freeze of its worker a holder may take to be told (the lease ttl).
pub fn check(
    workers: &[WorkerHistory],
    faults: &[Fault],
    logs: &HashMap<String, Vec<StoreEntry>>,
    grace_ns: u64,
) -> Verdict {
    let (sections, mut violations) = reconstruct(workers, faults);
    let mut by_key: BTreeMap<&str, Vec<&Section>> = BTreeMap::new();
    for section in sections.iter().filter(|s| s.begin.is_some()) {
        by_key.entry(&section.key).or_default().push(section);
    }
    for (key, granted) in &by_key {
        check_unique_fences(key, granted, &mut violations);
        check_exclusion(key, granted, faults, grace_ns, &mut violations);
        check_fence_order(key, granted, &mut violations);
        super::order::check_arrival_order(key, granted, &mut violations);
    }
    for section in &sections {
        check_cancel_promise(section, &mut violations);
    }
    let logs: BTreeMap<&String, &Vec<StoreEntry>> = logs.iter().collect();
    let written = written(workers);
    for (key, log) in &logs {
        check_store_log(key, log, &mut violations);
        check_store_agrees(key, log, &written, &mut violations);
    }

    let all_entries = || logs.values().flat_map(|log| log.iter());
    Verdict {
        sections: invoked(workers),
        granted: sections.iter().filter(|s| s.begin.is_some()).count(),
        completed: sections
            .iter()
            .filter(|s| s.outcome == Outcome::Ok && s.done.is_some())
            .count(),
        lost_signals: sections.iter().filter(|s| s.told.is_some()).count(),
        stale_refused: all_entries().filter(|e| !e.accepted).count(),
        accepted_writes: all_entries().filter(|e| e.accepted).count(),
        contended_handoffs: by_key.values().map(|g| contended_handoffs(g)).sum(),
        freezes_hit: faults_hit(faults, &sections, |fault, s| match fault {
            Fault::Freeze { worker, start, end } => {
                *worker == s.worker && s.held_over(*start, *end)
            }
            _ => false,
        }),
        kills_hit: faults_hit(faults, &sections, |fault, s| match fault {
            // A kill that met a section holding its lock (a killed section
            // ends at the kill, so its held interval reaches it).
            Fault::Kill { worker, t } => {
                *worker == s.worker && s.held_over(t.saturating_sub(1), t.saturating_add(1))
            }
            _ => false,
        }),
        cuts_hit: faults_hit(faults, &sections, |fault, s| match fault {
            Fault::Cut { worker, start, end } => *worker == s.worker && s.held_over(*start, *end),
            _ => false,
        }),
        dropped_replies: faults
            .iter()
            .filter(|f| matches!(f, Fault::DroppedReply { .. }))
            .count(),
        server_faults_hit: faults_hit(faults, &sections, |fault, s| match fault {
            Fault::Server { start, end, .. } => s.held_over(*start, *end),
            _ => false,
        }),
        fair_ordered: sections
            .iter()
            .filter(|s| s.begin.is_some() && s.arrival.is_some())
            .count(),
        // Not in the histories: the fleet adds the workers' counts.
        passed_in_process: 0,
        violations,
    }
}

/// Rebuilds every section that ended or whose worker was killed (then it
/// ends at the kill, [`Outcome::Killed`]), in worker then file order, with
/// the violations of H1 (integrity) and H2 (closure) found on the way.
pub fn reconstruct(workers: &[WorkerHistory], faults: &[Fault]) -> (Vec<Section>, Vec<String>) {
    let mut violations = Vec::new();
    let owners = owners(workers, &mut violations);
    let mut sections = Vec::new();
    for history in workers {
        check_torn_lines(history, faults, &mut violations);
        let partials = collect_partials(history, &owners, &mut violations);
        for partial in partials {
            if let Some(section) = close(partial, &history.worker, faults, &mut violations) {
                check_integrity(&section, &mut violations);
                sections.push(section);
            }
        }
    }
    (sections, violations)
}

/// A section as read so far: `end` may still be missing.
struct Partial {
    sid: String,
    key: String,
    mode: Mode,
    invoke: u64,
    begin: Option<(u64, u64)>,
    arrival: Option<u64>,
    writes: Vec<(u32, u64)>,
    done: Option<u64>,
    told: Option<u64>,
    end: Option<(Outcome, u64)>,
}

/// H1: sids are unique in a run. Maps each sid to the worker that invoked
/// it first.
fn owners<'a>(
    workers: &'a [WorkerHistory],
    violations: &mut Vec<String>,
) -> HashMap<&'a str, &'a str> {
    let mut owners = HashMap::new();
    for history in workers {
        let worker = history.worker.as_str();
        for event in &history.events {
            if !matches!(event, Event::Invoke { .. }) {
                continue;
            }
            match owners.entry(event.sid()) {
                Entry::Occupied(owner) => violations.push(format!(
                    "{worker}: `{event}` invokes {} again (already invoked by {}): record lost \
                     or torn",
                    event.sid(),
                    owner.get()
                )),
                Entry::Vacant(slot) => {
                    slot.insert(worker);
                }
            }
        }
    }
    owners
}

/// H1 (the record itself): each event after `invoke` belongs to a section
/// this worker invoked, once. `owners` is from [`owners`].
fn collect_partials(
    history: &WorkerHistory,
    owners: &HashMap<&str, &str>,
    violations: &mut Vec<String>,
) -> Vec<Partial> {
    let worker = history.worker.as_str();
    let mut partials: Vec<Partial> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for event in &history.events {
        let sid = event.sid();
        if let Event::Invoke { key, mode, t, .. } = event {
            // A repeated invoke was reported by `owners`.
            if owners.get(sid) != Some(&worker) || index.contains_key(sid) {
                continue;
            }
            index.insert(sid, partials.len());
            partials.push(Partial {
                sid: sid.to_owned(),
                key: key.clone(),
                mode: *mode,
                invoke: *t,
                begin: None,
                arrival: None,
                writes: Vec::new(),
                done: None,
                told: None,
                end: None,
            });
            continue;
        }
        let Some(&i) = index.get(sid) else {
            let whose = match owners.get(sid) {
                Some(&owner) if owner != worker => format!("a section of {owner}"),
                Some(_) => format!("before {worker} invoked it"),
                None => "which was never invoked".to_owned(),
            };
            violations.push(format!(
                "{worker}: `{event}` refers to {sid}, {whose}: record lost or torn"
            ));
            continue;
        };
        let partial = &mut partials[i];
        // A second begin/done/told/end for one section: keep the first.
        let first = match event {
            Event::Invoke { .. } => unreachable!("handled above"),
            Event::Begin { fence, t, .. } => set_once(&mut partial.begin, (*fence, *t)),
            Event::Arrived { arrival, .. } => set_once(&mut partial.arrival, *arrival),
            Event::Write { n, t, .. } => {
                partial.writes.push((*n, *t));
                true
            }
            Event::Done { t, .. } => set_once(&mut partial.done, *t),
            Event::Told { t, .. } => set_once(&mut partial.told, *t),
            Event::End { outcome, t, .. } => set_once(&mut partial.end, (*outcome, *t)),
        };
        if !first {
            violations.push(format!(
                "{}: {sid}: `{event}` is a second record of that kind: record lost or torn",
                partial.key
            ));
        }
    }
    partials
}

fn set_once<T>(slot: &mut Option<T>, value: T) -> bool {
    let first = slot.is_none();
    if first {
        *slot = Some(value);
    }
    first
}

/// H2: a section without `end` ends at the first kill of its worker after
/// its invoke; without one, a record was lost and the section is dropped
/// (its interval is unknown).
fn close(
    partial: Partial,
    worker: &str,
    faults: &[Fault],
    violations: &mut Vec<String>,
) -> Option<Section> {
    let (outcome, end) = match partial.end {
        Some(end) => end,
        None => match first_kill(faults, worker, partial.invoke) {
            Some(t) => (Outcome::Killed, t),
            None => {
                violations.push(format!(
                    "{}: section {} (invoked at {}) never ended and its worker {worker} was not \
                     killed: a record was lost",
                    partial.key, partial.sid, partial.invoke
                ));
                return None;
            }
        },
    };
    Some(Section {
        sid: partial.sid,
        worker: worker.to_owned(),
        key: partial.key,
        mode: partial.mode,
        invoke: partial.invoke,
        begin: partial.begin,
        arrival: partial.arrival,
        writes: partial.writes,
        done: partial.done,
        told: partial.told,
        end,
        outcome,
    })
}

/// The first kill of `worker` at or after `after`.
fn first_kill(faults: &[Fault], worker: &str, after: u64) -> Option<u64> {
    faults
        .iter()
        .filter_map(|fault| match fault {
            Fault::Kill { worker: w, t } if w == worker && *t >= after => Some(*t),
            _ => None,
        })
        .min()
}

fn was_killed(faults: &[Fault], worker: &str) -> bool {
    first_kill(faults, worker, 0).is_some()
}

/// H1: a kill tears at most the line being written, the last one.
fn check_torn_lines(history: &WorkerHistory, faults: &[Fault], violations: &mut Vec<String>) {
    let (worker, torn) = (&history.worker, history.torn_lines);
    if torn == 0 {
        return;
    }
    let why = if !was_killed(faults, worker) {
        format!("{torn} torn line(s) but {worker} was never killed")
    } else if torn > 1 {
        format!("{torn} torn lines but a kill tears at most the last one")
    } else if !history.last_line_torn {
        "a torn line before the end of its history (a kill tears only the last one)".to_owned()
    } else {
        return;
    };
    violations.push(format!("{worker}: {why}: record lost or torn"));
}

/// H1: per section, invoke <= begin <= each write <= done <= end, told >=
/// begin; nothing of the body without a begin; writes numbered 1, 2, ...
fn check_integrity(section: &Section, violations: &mut Vec<String>) {
    let (key, sid) = (&section.key, &section.sid);
    let mut broken =
        |what: String| violations.push(format!("{key}: {sid}: {what}: record lost or torn"));

    let mut chain = vec![("invoke".to_owned(), section.invoke)];
    chain.extend(section.begin.map(|(_, t)| ("begin".to_owned(), t)));
    chain.extend(
        section
            .writes
            .iter()
            .map(|(n, t)| (format!("write {n}"), *t)),
    );
    chain.extend(section.done.map(|t| ("done".to_owned(), t)));
    let end = match section.outcome {
        Outcome::Killed => "the kill of its worker".to_owned(),
        outcome => format!("end {outcome}"),
    };
    chain.push((end, section.end));
    for pair in chain.windows(2) {
        let ((before, t0), (after, t1)) = (&pair[0], &pair[1]);
        if t0 > t1 {
            broken(format!("{before} at {t0} is later than {after} at {t1}"));
        }
    }

    match section.began() {
        Some(began) => {
            if let Some(told) = section.told.filter(|&told| told < began) {
                broken(format!("told at {told} before its begin at {began}"));
            }
        }
        None => {
            let mut orphans: Vec<&str> = Vec::new();
            if !section.writes.is_empty() {
                orphans.push("writes");
            }
            if section.done.is_some() {
                orphans.push("done");
            }
            if section.told.is_some() {
                orphans.push("told");
            }
            if !orphans.is_empty() {
                broken(format!("{} recorded but no begin", orphans.join(", ")));
            }
        }
    }

    let numbers: Vec<u32> = section.writes.iter().map(|(n, _)| *n).collect();
    if !numbers.iter().zip(1..).all(|(&n, expected)| n == expected) {
        broken(format!("writes numbered {numbers:?}, not 1, 2, ..."));
    }
}

/// S1: a fence is granted once per key.
fn check_unique_fences(key: &str, granted: &[&Section], violations: &mut Vec<String>) {
    let mut by_fence = granted.to_vec();
    by_fence.sort_by_key(|s| (s.fence(), s.began()));
    for pair in by_fence.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.fence() == b.fence() {
            violations.push(format!(
                "{key}: fence {} granted twice: {} began at {} and {} began at {}",
                a.fence_text(),
                a.sid,
                a.began().unwrap_or_default(),
                b.sid,
                b.began().unwrap_or_default(),
            ));
        }
    }
}

/// S2: when two held intervals overlap, the older fence was told of its
/// loss by the time the newer one began, or was frozen by the test and told
/// (or gone) within `grace_ns` of its thaw.
fn check_exclusion(
    key: &str,
    granted: &[&Section],
    faults: &[Fault],
    grace_ns: u64,
    violations: &mut Vec<String>,
) {
    let mut by_begin = granted.to_vec();
    by_begin.sort_by_key(|s| s.began());
    for (i, first) in by_begin.iter().enumerate() {
        // Sorted by begin: only sections beginning before `first` ends can overlap it.
        for second in by_begin[i + 1..]
            .iter()
            .take_while(|s| s.began() < Some(first.held_until()))
        {
            if !first.held_over(second.began().unwrap_or_default(), second.held_until()) {
                continue;
            }
            let (older, newer) = if first.fence() < second.fence() {
                (first, second)
            } else if second.fence() < first.fence() {
                (second, first)
            } else {
                continue; // One fence twice: S1's.
            };
            if let Some(why) = overlap_unexcused(older, newer, faults, grace_ns) {
                violations.push(format!(
                    "{key}: fence {} ({}) held until {}{} while fence {} ({}) began at {}, {why}",
                    older.fence_text(),
                    older.sid,
                    older.held_until(),
                    if older.outcome == Outcome::Killed {
                        " (killed)"
                    } else {
                        ""
                    },
                    newer.fence_text(),
                    newer.sid,
                    newer.began().unwrap_or_default(),
                ));
            }
        }
    }
}

/// Why `older` holding into `newer`'s section breaks exclusion, or None
/// when it was told in time.
fn overlap_unexcused(
    older: &Section,
    newer: &Section,
    faults: &[Fault],
    grace_ns: u64,
) -> Option<String> {
    let newer_began = newer.began().unwrap_or_default();
    if older.told.is_some_and(|told| told <= newer_began) {
        return None;
    }
    // Frozen after it asked for the lock (while holding it, or between the
    // grant and its first statement) and before it stopped relying on it,
    // before the newer one began: it could not be told while stopped, so
    // it must be told within `grace_ns` after the thaw. Ending its section
    // then is no excuse (a holder that finishes a stale write untold is
    // the very fault to catch), unless its worker was killed: a killed
    // section ends at the kill, told or not.
    let freezes: Vec<(u64, u64)> = faults
        .iter()
        .filter_map(|fault| match fault {
            Fault::Freeze { worker, start, end }
                if *worker == older.worker
                    && *start <= newer_began
                    && *start < older.held_until()
                    && *end >= older.invoke =>
            {
                Some((*start, *end))
            }
            _ => None,
        })
        .collect();
    let covered = |thaw: u64| {
        let limit = thaw.saturating_add(grace_ns);
        older.told.is_some_and(|told| told <= limit)
            || (older.outcome == Outcome::Killed && older.held_until() <= limit)
    };
    if freezes.iter().any(|&(_, thaw)| covered(thaw)) {
        return None;
    }
    let told = match older.told {
        Some(t) => format!("at {t}"),
        None => "never".to_owned(),
    };
    let freeze = match freezes.iter().max_by_key(|(_, thaw)| *thaw) {
        Some((start, thaw)) => format!(
            " (frozen {start}..{thaw}, yet neither told nor ended within the grace of \
             {grace_ns} ns after the thaw)"
        ),
        None => String::new(),
    };
    let kind = if older.told.is_some() {
        "a late loss signal"
    } else {
        "a silent overlap"
    };
    Some(format!("and was told {told}{freeze}: {kind}"))
}

/// S5: a section invoked after another's held interval ended carries a
/// larger fence. (Invoked, not begun: its grant came after it asked, while
/// a freeze can put any time between a grant and the body's first step.)
fn check_fence_order(key: &str, granted: &[&Section], violations: &mut Vec<String>) {
    let mut by_end = granted.to_vec();
    by_end.sort_by_key(|s| s.held_until());
    let mut by_invoke = granted.to_vec();
    by_invoke.sort_by_key(|s| s.invoke);
    // Sweep: `highest` is the largest fence among sections ended so far.
    let mut ended = by_end.iter().peekable();
    let mut highest: Option<&Section> = None;
    for newer in by_invoke {
        while let Some(older) = ended.next_if(|s| s.held_until() <= newer.invoke) {
            if highest.is_none_or(|h| older.fence() > h.fence()) {
                highest = Some(older);
            }
        }
        // Equal fences are S1's.
        if let Some(older) = highest.filter(|h| h.fence() > newer.fence()) {
            violations.push(format!(
                "{key}: fence went backwards: fence {} ({}) ended at {}, then fence {} ({}) \
                 was invoked at {}",
                older.fence_text(),
                older.sid,
                older.held_until(),
                newer.fence_text(),
                newer.sid,
                newer.invoke,
            ));
        }
    }
}

/// S3: a `cancel` section told while its call was running is cancelled
/// (ends lost, or was killed), and sends at most the one write that was
/// already on its way.
fn check_cancel_promise(section: &Section, violations: &mut Vec<String>) {
    let Some(told) = section.told else {
        return;
    };
    if section.mode != Mode::Cancel {
        return;
    }
    let (key, sid, fence) = (&section.key, &section.sid, section.fence_text());
    // A signal seen after the call returned had nothing left to cancel.
    let body_unfinished = section.done.is_none_or(|done| told < done) && told < section.end;
    if body_unfinished && !matches!(section.outcome, Outcome::Lost | Outcome::Killed) {
        let body = match section.done {
            Some(done) => format!("before its body was done at {done}"),
            None => "and its body never finished".to_owned(),
        };
        violations.push(format!(
            "{key}: {sid} (fence {fence}, cancel) was told at {told} {body}, yet ended {} at {}: \
             the cancel promise was broken",
            section.outcome, section.end
        ));
    }
    let late: Vec<String> = section
        .writes
        .iter()
        .filter(|(_, t)| *t > told)
        .map(|(n, t)| format!("write {n} at {t}"))
        .collect();
    if late.len() >= 2 {
        violations.push(format!(
            "{key}: {sid} (fence {fence}, cancel) was told at {told} and then sent {} writes \
             ({}): wrote after it was told",
            late.len(),
            late.join(", ")
        ));
    }
}

/// S4: the store accepts exactly the writes whose fence is at least the
/// highest it accepted before.
fn check_store_log(key: &str, log: &[StoreEntry], violations: &mut Vec<String>) {
    let mut highest = 0;
    for (i, entry) in log.iter().enumerate() {
        let current = entry.fence >= highest;
        if entry.accepted != current {
            let what = if entry.accepted {
                "a stale write accepted"
            } else {
                "a current write refused"
            };
            violations.push(format!(
                "{key}: store log entry #{i} `{entry}` came when the highest accepted fence was \
                 {highest}: {what}"
            ));
        }
        if entry.accepted {
            highest = highest.max(entry.fence);
        }
    }
}

/// What a section recorded about its writes, for H3: key, fence, numbers.
struct Written<'a> {
    key: Option<&'a str>,
    fence: Option<u64>,
    writes: Vec<u32>,
}

/// Every sid's recorded writes, straight from the events (so that a
/// section dropped for a lost record still explains its store entries).
fn written(workers: &[WorkerHistory]) -> HashMap<&str, Written<'_>> {
    let mut written: HashMap<&str, Written<'_>> = HashMap::new();
    for event in workers.iter().flat_map(|w| w.events.iter()) {
        let entry = written.entry(event.sid()).or_insert(Written {
            key: None,
            fence: None,
            writes: Vec::new(),
        });
        match event {
            Event::Invoke { key, .. } => {
                entry.key.get_or_insert(key);
            }
            Event::Begin { fence, .. } => {
                entry.fence.get_or_insert(*fence);
            }
            Event::Write { n, .. } => entry.writes.push(*n),
            _ => {}
        }
    }
    written
}

/// H3: every write the store saw was recorded by a section of that key
/// with that fence.
fn check_store_agrees(
    key: &str,
    log: &[StoreEntry],
    written: &HashMap<&str, Written<'_>>,
    violations: &mut Vec<String>,
) {
    for (i, entry) in log.iter().enumerate() {
        let sid = entry.sid.as_str();
        let why = match written.get(sid) {
            None => format!("but no worker recorded {sid}"),
            Some(w) if w.key != Some(key) => {
                format!("but {sid} locked {}", w.key.unwrap_or("nothing"))
            }
            Some(w) => match w.fence {
                None => format!("but {sid} never began"),
                Some(fence) if fence != entry.fence => format!("but {sid} held fence {fence}"),
                Some(_) if !w.writes.contains(&entry.n) => {
                    format!("but {sid} recorded no write {}", entry.n)
                }
                Some(_) => continue,
            },
        };
        violations.push(format!(
            "{key}: phantom write: store log entry #{i} `{entry}` {why}"
        ));
    }
}

/// Sections invoked (each sid once).
fn invoked(workers: &[WorkerHistory]) -> usize {
    let mut sids: Vec<&str> = workers
        .iter()
        .flat_map(|w| w.events.iter())
        .filter(|e| matches!(e, Event::Invoke { .. }))
        .map(Event::sid)
        .collect();
    sids.sort_unstable();
    sids.dedup();
    sids.len()
}

/// Sections that began as soon as the previous holder (by fence) ended,
/// having been invoked while it held: the lock was handed over under
/// contention.
fn contended_handoffs(granted: &[&Section]) -> usize {
    let mut by_fence = granted.to_vec();
    by_fence.sort_by_key(|s| s.fence());
    by_fence
        .windows(2)
        .filter(|pair| {
            let (a, b) = (pair[0], pair[1]);
            b.invoke < a.held_until() && b.began().is_some_and(|began| a.held_until() <= began)
        })
        .count()
}

/// Faults for which `hits` holds for some section.
fn faults_hit(
    faults: &[Fault],
    sections: &[Section],
    hits: impl Fn(&Fault, &Section) -> bool,
) -> usize {
    faults
        .iter()
        .filter(|fault| sections.iter().any(|s| hits(fault, s)))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lease ttl the tests run with.
    const GRACE: u64 = 100;

    fn worker(name: &str, lines: &[&str]) -> WorkerHistory {
        let history = WorkerHistory::parse(name, &format!("{}\n", lines.join("\n")));
        assert_eq!(history.torn_lines, 0, "a test line does not parse");
        history
    }

    fn faults(lines: &[&str]) -> Vec<Fault> {
        lines.iter().map(|l| Fault::parse(l).expect(l)).collect()
    }

    fn logs(key: &str, entries: &[&str]) -> HashMap<String, Vec<StoreEntry>> {
        let log = entries
            .iter()
            .map(|e| StoreEntry::parse(e).expect(e))
            .collect();
        HashMap::from([(key.to_owned(), log)])
    }

    fn no_logs() -> HashMap<String, Vec<StoreEntry>> {
        HashMap::new()
    }

    /// Asserts exactly one violation, containing every piece of `needles`.
    fn only_violation(verdict: &Verdict, needles: &[&str]) {
        assert_eq!(verdict.violations.len(), 1, "{:#?}", verdict.violations);
        let violation = &verdict.violations[0];
        for needle in needles {
            assert!(
                violation.contains(needle),
                "{needle:?} not in {violation:?}"
            );
        }
    }

    /// w1.1 holds fence 5 on r0 from 110; w2.1 takes fence 6 at 300 and
    /// completes. The tests vary how w1.1 ends.
    fn older_then_newer(older_tail: &[&str]) -> Vec<WorkerHistory> {
        let mut w1 = vec![
            "invoke w1.1 r0 cancel 100",
            "begin w1.1 5 110",
            "write w1.1 1 120",
        ];
        w1.extend_from_slice(older_tail);
        vec![
            worker("w1", &w1),
            worker(
                "w2",
                &[
                    "invoke w2.1 r0 cancel 150",
                    "begin w2.1 6 300",
                    "write w2.1 1 310",
                    "done w2.1 320",
                    "end w2.1 ok 330",
                ],
            ),
        ]
    }

    /// A handoff, a told loss overlapped by the next owner (with the one
    /// write already on its way), a frozen holder told after its thaw, a
    /// killed holder with a torn last line, and faults that hit.
    fn clean_run() -> (
        Vec<WorkerHistory>,
        Vec<Fault>,
        HashMap<String, Vec<StoreEntry>>,
    ) {
        let w1 = worker(
            "w1",
            &[
                "invoke w1.1 r0 cancel 100",
                "begin w1.1 10 110",
                "write w1.1 1 120",
                "done w1.1 130",
                "end w1.1 ok 140",
                "invoke w1.2 r0 cancel 200",
                "begin w1.2 12 210",
                "write w1.2 1 220",
                "told w1.2 300",
                "write w1.2 2 302",
                "end w1.2 lost 305",
                "invoke w1.3 r0 cancel 500",
                "begin w1.3 15 700",
                "write w1.3 1 710",
                "done w1.3 720",
                "end w1.3 ok 730",
                "invoke w1.4 r0 cancel 1125",
                "begin w1.4 17 1300",
                "write w1.4 1 1310",
                "done w1.4 1320",
                "end w1.4 ok 1330",
            ],
        );
        // Killed in the middle of writing its `done` line.
        let w2 = WorkerHistory::parse(
            "w2",
            "invoke w2.1 r0 cancel 115\n\
             begin w2.1 11 150\n\
             write w2.1 1 160\n\
             done w2.1 170\n\
             end w2.1 ok 180\n\
             invoke w2.2 r0 cancel 250\n\
             begin w2.2 13 300\n\
             write w2.2 1 310\n\
             done w2.2 320\n\
             end w2.2 ok 330\n\
             invoke w2.3 r0 cancel 1100\n\
             begin w2.3 16 1110\n\
             write w2.3 1 1120\n\
             done w2.3 11",
        );
        // Frozen while holding; fence 15 took over meanwhile.
        let w3 = worker(
            "w3",
            &[
                "invoke w3.1 r0 cancel 400",
                "begin w3.1 14 410",
                "write w3.1 1 420",
                "write w3.1 2 1002",
                "told w3.1 1005",
                "end w3.1 lost 1010",
            ],
        );
        let faults = faults(&[
            "cut w1 200 260",
            "dropped_reply w1 225",
            "freeze w3 430 1000",
            "server failover 600 650",
            "kill w2 1130",
        ]);
        let logs = logs(
            "r0",
            &[
                "A 10 w1.1 1",
                "A 11 w2.1 1",
                "A 12 w1.2 1",
                "A 12 w1.2 2",
                "A 13 w2.2 1",
                "A 14 w3.1 1",
                "A 15 w1.3 1",
                "R 14 w3.1 2",
                "A 16 w2.3 1",
                "A 17 w1.4 1",
            ],
        );
        (vec![w1, w2, w3], faults, logs)
    }

    #[test]
    fn a_clean_history_passes_with_the_expected_counts() {
        let (workers, faults, logs) = clean_run();
        let verdict = check(&workers, &faults, &logs, GRACE);
        assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
        let expected = Verdict {
            sections: 8,
            granted: 8,
            completed: 5,
            lost_signals: 2,
            stale_refused: 1,
            accepted_writes: 9,
            // 10 -> 11 (w2.1 waited from 115) and 16 -> 17 (w1.4 from 1125).
            contended_handoffs: 2,
            freezes_hit: 1,
            kills_hit: 1,
            cuts_hit: 1,
            dropped_replies: 1,
            // The failover at 600-650, while w3.1 held (frozen).
            server_faults_hit: 1,
            passed_in_process: 0,
            fair_ordered: 0,
            violations: Vec::new(),
        };
        assert_eq!(verdict, expected);
        let all_ones = Minimums {
            completed: 1,
            handoffs: 1,
            told: 1,
            stale_refused: 1,
            freezes_hit: 1,
            kills_hit: 1,
            cuts_hit: 1,
            dropped_replies: 1,
            server_faults_hit: 1,
            passed_in_process: 0,
            fair_ordered: 0,
        };
        assert_eq!(verdict.shortfalls(&all_ones), Vec::<String>::new());
        assert_eq!(
            verdict.summary(),
            "chaos: sections=8 granted=8 completed=5 handoffs=2 told=2 stale_refused=1 \
             accepted_writes=9 freezes_hit=1 kills_hit=1 cuts_hit=1 dropped_replies=1 \
             server_faults_hit=1 passed_in_process=0 fair_ordered=0 violations=0"
        );
    }

    #[test]
    fn a_killed_section_ends_at_the_kill() {
        let (workers, faults, _) = clean_run();
        let (sections, violations) = reconstruct(&workers, &faults);
        assert!(violations.is_empty(), "{violations:#?}");
        let killed = sections.iter().find(|s| s.sid == "w2.3").unwrap();
        assert_eq!(
            *killed,
            Section {
                sid: "w2.3".into(),
                worker: "w2".into(),
                key: "r0".into(),
                mode: Mode::Cancel,
                invoke: 1100,
                begin: Some((16, 1110)),
                arrival: None,
                writes: vec![(1, 1120)],
                done: None,
                told: None,
                end: 1130,
                outcome: Outcome::Killed,
            }
        );
    }

    #[test]
    fn s2_a_silent_overlap() {
        let workers = older_then_newer(&["done w1.1 390", "end w1.1 ok 400"]);
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        only_violation(
            &verdict,
            &[
                "r0: fence 5 (w1.1) held until 390 while fence 6 (w2.1) began at 300",
                "told never: a silent overlap",
            ],
        );
    }

    #[test]
    fn s2_a_late_loss_signal() {
        let workers = older_then_newer(&["told w1.1 350", "end w1.1 lost 360"]);
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        only_violation(
            &verdict,
            &[
                "r0: fence 5 (w1.1) held until 360 while fence 6 (w2.1) began at 300",
                "told at 350: a late loss signal",
            ],
        );
    }

    #[test]
    fn s2_a_freeze_long_before_the_signal_is_no_excuse() {
        let workers = older_then_newer(&["told w1.1 350", "end w1.1 lost 360"]);
        // Thawed at 200: told by 300 would do, 350 is too late.
        let late = faults(&["freeze w1 130 200"]);
        let verdict = check(&workers, &late, &no_logs(), GRACE);
        only_violation(
            &verdict,
            &[
                "told at 350 (frozen 130..200",
                "grace of 100 ns",
                "a late loss signal",
            ],
        );
        // Thawed at 260: told within the grace.
        let covering = faults(&["freeze w1 130 260"]);
        let verdict = check(&workers, &covering, &no_logs(), GRACE);
        assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
        // A freeze that began after the newer owner began excuses nothing.
        let after = faults(&["freeze w1 301 340"]);
        let verdict = check(&workers, &after, &no_logs(), GRACE);
        only_violation(&verdict, &["a late loss signal"]);
    }

    #[test]
    fn s2_a_frozen_holder_that_finishes_untold_after_the_thaw_is_caught() {
        // Its lease ran out while it was stopped, and after the thaw it
        // finished its stale work without being told: what a lost loss
        // signal looks like. Ending within the grace excuses nothing.
        let workers = older_then_newer(&["done w1.1 340", "end w1.1 ok 350"]);
        let verdict = check(&workers, &faults(&["freeze w1 130 260"]), &no_logs(), GRACE);
        only_violation(&verdict, &["a silent overlap", "frozen 130..260"]);
    }

    #[test]
    fn s2_a_frozen_holder_killed_soon_after_the_thaw_passes_untold() {
        // Killed before it could be told: it relied on nothing after.
        let workers = older_then_newer(&[]);
        let verdict = check(
            &workers,
            &faults(&["freeze w1 130 260", "kill w1 340"]),
            &no_logs(),
            GRACE,
        );
        assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
    }

    #[test]
    fn s2_a_freeze_after_the_holder_finished_excuses_nothing() {
        // It finished (done) before the freeze; the newer one began before
        // that: an overlap no freeze explains.
        let workers = older_then_newer(&["done w1.1 305", "end w1.1 ok 350"]);
        let verdict = check(&workers, &faults(&["freeze w1 306 320"]), &no_logs(), GRACE);
        only_violation(&verdict, &["a silent overlap"]);
    }

    #[test]
    fn s2_a_holder_frozen_between_its_grant_and_its_begin_is_covered_too() {
        // Frozen right after invoking (the grant came in, the body had not
        // started): its lease ran out while stopped, the newer owner began,
        // and after the thaw it began (while the newer one still held) and
        // was told within the grace.
        let workers = vec![
            worker(
                "w1",
                &[
                    "invoke w1.1 r0 cancel 100",
                    "begin w1.1 5 420",
                    "told w1.1 430",
                    "end w1.1 lost 440",
                ],
            ),
            worker(
                "w2",
                &[
                    "invoke w2.1 r0 cancel 150",
                    "begin w2.1 6 300",
                    "done w2.1 480",
                    "end w2.1 ok 490",
                ],
            ),
        ];
        let verdict = check(&workers, &faults(&["freeze w1 105 400"]), &no_logs(), GRACE);
        assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
        let unfrozen = check(&workers, &[], &no_logs(), GRACE);
        only_violation(&unfrozen, &["fence 5 (w1.1)", "a late loss signal"]);
    }

    #[test]
    fn s2_a_killed_holder_overlapped_before_the_kill() {
        let workers = older_then_newer(&[]);
        let verdict = check(&workers, &faults(&["kill w1 305"]), &no_logs(), GRACE);
        only_violation(
            &verdict,
            &[
                "fence 5 (w1.1) held until 305 (killed) while fence 6 (w2.1) began at 300",
                "a silent overlap",
            ],
        );
        // Killed before the newer owner began: no overlap.
        let verdict = check(&workers, &faults(&["kill w1 290"]), &no_logs(), GRACE);
        assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
    }

    #[test]
    fn s3b_a_cancel_section_that_wrote_twice_after_being_told() {
        let workers = [worker(
            "w1",
            &[
                "invoke w1.1 r0 cancel 100",
                "begin w1.1 5 110",
                "write w1.1 1 120",
                "told w1.1 200",
                "write w1.1 2 210",
                "write w1.1 3 220",
                "end w1.1 lost 230",
            ],
        )];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        only_violation(
            &verdict,
            &[
                "r0: w1.1 (fence 5, cancel) was told at 200 and then sent 2 writes",
                "write 2 at 210, write 3 at 220",
                "wrote after it was told",
            ],
        );
    }

    #[test]
    fn s3a_told_before_done_but_ended_ok() {
        let workers = [worker(
            "w1",
            &[
                "invoke w1.1 r0 cancel 100",
                "begin w1.1 5 110",
                "told w1.1 200",
                "done w1.1 250",
                "end w1.1 ok 260",
            ],
        )];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        only_violation(
            &verdict,
            &[
                "r0: w1.1 (fence 5, cancel) was told at 200 before its body was done at 250",
                "ended ok at 260",
                "the cancel promise was broken",
            ],
        );
    }

    #[test]
    fn s3_continue_mode_is_exempt() {
        // Ignores the signal, writes twice more: the store turns both away.
        let workers = [
            worker(
                "w1",
                &[
                    // (continue: the early `told` would break S3 too)
                    "invoke w1.1 r0 continue 100",
                    "begin w1.1 5 110",
                    "told w1.1 200",
                    "write w1.1 1 250",
                    "write w1.1 2 260",
                    "done w1.1 270",
                    "end w1.1 ok 280",
                ],
            ),
            worker(
                "w2",
                &[
                    "invoke w2.1 r0 cancel 150",
                    "begin w2.1 6 200",
                    "write w2.1 1 210",
                    "done w2.1 220",
                    "end w2.1 ok 230",
                ],
            ),
        ];
        let logs = logs("r0", &["A 6 w2.1 1", "R 5 w1.1 1", "R 5 w1.1 2"]);
        let verdict = check(&workers, &[], &logs, GRACE);
        assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
        assert_eq!(verdict.stale_refused, 2);
    }

    #[test]
    fn s1_a_duplicate_fence() {
        let workers = [
            worker(
                "w1",
                &[
                    "invoke w1.1 r0 cancel 100",
                    "begin w1.1 5 110",
                    "done w1.1 120",
                    "end w1.1 ok 130",
                ],
            ),
            worker(
                "w2",
                &[
                    "invoke w2.1 r0 cancel 200",
                    "begin w2.1 5 210",
                    "done w2.1 220",
                    "end w2.1 ok 230",
                ],
            ),
        ];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        only_violation(
            &verdict,
            &["r0: fence 5 granted twice: w1.1 began at 110 and w2.1 began at 210"],
        );
    }

    #[test]
    fn s5_fences_going_backwards() {
        let workers = [
            worker(
                "w1",
                &[
                    "invoke w1.1 r0 cancel 100",
                    "begin w1.1 7 110",
                    "done w1.1 120",
                    "end w1.1 ok 130",
                ],
            ),
            worker(
                "w2",
                &[
                    "invoke w2.1 r0 cancel 200",
                    "begin w2.1 6 210",
                    "done w2.1 220",
                    "end w2.1 ok 230",
                ],
            ),
        ];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        only_violation(
            &verdict,
            &[
                "r0: fence went backwards: fence 7 (w1.1) ended at 120, then fence 6 (w2.1) was invoked at 200",
            ],
        );
    }

    #[test]
    fn h2_a_section_that_never_ended_in_a_live_worker() {
        let workers = [worker(
            "w1",
            &["invoke w1.1 r0 cancel 100", "begin w1.1 5 110"],
        )];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        only_violation(
            &verdict,
            &[
                "r0: section w1.1 (invoked at 100) never ended and its worker w1 was not killed: a record was lost",
            ],
        );
        assert_eq!(verdict.sections, 1);
        // A kill before the invoke does not close it.
        let verdict = check(&workers, &faults(&["kill w1 90"]), &no_logs(), GRACE);
        only_violation(&verdict, &["a record was lost"]);
    }

    #[test]
    fn h1_a_torn_line_in_a_worker_that_was_not_killed() {
        let text = "invoke w1.1 r0 cancel 100\nbegin w1.1 5\nend w1.1 ok 130\n";
        let workers = [WorkerHistory::parse("w1", text)];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        only_violation(
            &verdict,
            &["w1: 1 torn line(s) but w1 was never killed: record lost or torn"],
        );
        // Killed, but the torn line is not the last one.
        let verdict = check(&workers, &faults(&["kill w1 500"]), &no_logs(), GRACE);
        only_violation(&verdict, &["a torn line before the end of its history"]);
        // Killed, two torn lines.
        let text = "invoke w1.1 r0 cancel 100\nbegin w1.1 5\nend w1.1 ok 130\nend w1";
        let workers = [WorkerHistory::parse("w1", text)];
        let verdict = check(&workers, &faults(&["kill w1 500"]), &no_logs(), GRACE);
        only_violation(
            &verdict,
            &["2 torn lines but a kill tears at most the last one"],
        );
    }

    #[test]
    fn h1_events_out_of_order_or_of_no_invoked_section() {
        let workers = [
            worker(
                "w1",
                &[
                    "begin w1.1 5 90",
                    // (continue: the early `told` would break S3 too)
                    "invoke w1.1 r0 continue 100",
                    "begin w1.1 5 110",
                    "write w1.1 1 140",
                    "done w1.1 130",
                    "told w1.1 105",
                    "end w1.1 ok 150",
                    "write w2.1 1 160",
                    "done w3.1 170",
                    "invoke w1.2 r0 cancel 200",
                    "write w1.2 2 210",
                    "end w1.2 error 220",
                    "end w1.2 error 221",
                ],
            ),
            worker("w2", &["invoke w2.1 r0 cancel 100", "end w2.1 timeout 120"]),
        ];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        let expected = [
            "w1: `begin w1.1 5 90` refers to w1.1, before w1 invoked it: record lost or torn",
            "w1: `write w2.1 1 160` refers to w2.1, a section of w2: record lost or torn",
            "w1: `done w3.1 170` refers to w3.1, which was never invoked: record lost or torn",
            "r0: w1.2: `end w1.2 error 221` is a second record of that kind: record lost or torn",
            "r0: w1.1: write 1 at 140 is later than done at 130: record lost or torn",
            "r0: w1.1: told at 105 before its begin at 110: record lost or torn",
            "r0: w1.2: writes recorded but no begin: record lost or torn",
            "r0: w1.2: writes numbered [2], not 1, 2, ...: record lost or torn",
        ];
        assert_eq!(verdict.violations, expected);
    }

    #[test]
    fn h1_a_sid_invoked_twice() {
        let workers = [
            worker("w1", &["invoke w1.1 r0 cancel 100", "end w1.1 timeout 120"]),
            worker("w2", &["invoke w1.1 r0 cancel 130", "end w1.1 timeout 140"]),
        ];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        assert_eq!(
            verdict.violations,
            [
                "w2: `invoke w1.1 r0 cancel 130` invokes w1.1 again (already invoked by w1): \
                 record lost or torn",
                "w2: `end w1.1 timeout 140` refers to w1.1, a section of w1: record lost or torn",
            ]
        );
    }

    #[test]
    fn h3_a_phantom_store_write() {
        let workers = older_then_newer(&["told w1.1 300", "end w1.1 lost 305"]);
        let logs = logs(
            "r0",
            &[
                "A 5 w1.1 1",
                "A 5 w1.1 2",
                "A 6 w2.1 1",
                "R 5 w2.1 1",
                "R 4 w9.1 1",
            ],
        );
        let verdict = check(&workers, &[], &logs, GRACE);
        assert_eq!(
            verdict.violations,
            [
                "r0: phantom write: store log entry #1 `A 5 w1.1 2` but w1.1 recorded no write 2",
                "r0: phantom write: store log entry #3 `R 5 w2.1 1` but w2.1 held fence 6",
                "r0: phantom write: store log entry #4 `R 4 w9.1 1` but no worker recorded w9.1",
            ]
        );
        // The right entries in another resource's log are phantoms there.
        let elsewhere = HashMap::from([(
            "r1".to_owned(),
            vec![StoreEntry::parse("A 6 w2.1 1").unwrap()],
        )]);
        let verdict = check(&workers, &[], &elsewhere, GRACE);
        only_violation(&verdict, &["r1: phantom write", "but w2.1 locked r0"]);
    }

    #[test]
    fn s4_a_stale_write_accepted() {
        // w1.1 ignores its loss; the store takes its stale write anyway.
        let workers = [
            worker(
                "w1",
                &[
                    // (continue: the early `told` would break S3 too)
                    "invoke w1.1 r0 continue 100",
                    "begin w1.1 5 110",
                    "told w1.1 150",
                    "write w1.1 1 300",
                    "end w1.1 lost 400",
                ],
            ),
            worker(
                "w2",
                &[
                    "invoke w2.1 r0 cancel 120",
                    "begin w2.1 7 150",
                    "write w2.1 1 200",
                    "done w2.1 210",
                    "end w2.1 ok 220",
                ],
            ),
        ];
        let stale = logs("r0", &["A 7 w2.1 1", "A 5 w1.1 1"]);
        let verdict = check(&workers, &[], &stale, GRACE);
        only_violation(
            &verdict,
            &[
                "r0: store log entry #1 `A 5 w1.1 1` came when the highest accepted fence was 7: a stale write accepted",
            ],
        );
        let refused = logs("r0", &["R 5 w1.1 1", "R 7 w2.1 1"]);
        let verdict = check(&workers, &[], &refused, GRACE);
        assert_eq!(verdict.violations.len(), 2, "{:#?}", verdict.violations);
        assert!(
            verdict
                .violations
                .iter()
                .all(|v| v.ends_with("a current write refused")),
            "{:#?}",
            verdict.violations
        );
    }

    #[test]
    fn a_run_where_nothing_completed_falls_short() {
        let workers = [worker(
            "w1",
            &["invoke w1.1 r0 cancel 100", "end w1.1 timeout 200"],
        )];
        let verdict = check(&workers, &[], &no_logs(), GRACE);
        assert!(verdict.violations.is_empty(), "{:#?}", verdict.violations);
        let minimums = Minimums {
            completed: 1,
            told: 1,
            ..Minimums::default()
        };
        assert_eq!(
            verdict.shortfalls(&minimums),
            [
                "only 0 completed sections; the run needs at least 1 to prove anything",
                "only 0 loss signals observed; the run needs at least 1 to prove anything",
            ]
        );
        assert!(verdict.shortfalls(&Minimums::default()).is_empty());
    }

    #[test]
    fn large_fences_compare_exactly() {
        // Microseconds since the epoch: neighbours differ in the last digit.
        let workers = [
            worker(
                "w1",
                &[
                    "invoke w1.1 r0 cancel 100",
                    "begin w1.1 1752000000000001 110",
                    "write w1.1 1 120",
                    "done w1.1 130",
                    "end w1.1 ok 140",
                ],
            ),
            worker(
                "w2",
                &[
                    "invoke w2.1 r0 cancel 200",
                    "begin w2.1 1752000000000000 210",
                    "done w2.1 230",
                    "end w2.1 ok 240",
                ],
            ),
        ];
        let logs = logs("r0", &["A 1752000000000001 w1.1 1"]);
        let verdict = check(&workers, &[], &logs, GRACE);
        only_violation(
            &verdict,
            &["fence 1752000000000001 (w1.1) ended at 130, then fence 1752000000000000 (w2.1)"],
        );
    }
}

//! A run of several metrics (`docs/analysis.md#the-run`): Argo Rollouts' AnalysisRun. Metrics
//! are measured side by side; the run is the worst of its completed metrics; a metric that
//! ends Failed, Error or Inconclusive terminates the run early; dry-run metrics are measured
//! and reported but never decide. Sans-IO: [`Run::next_due`] says when to query, the caller
//! records what came back.

use super::Phase;
use super::measure::{Measurement, ProviderValue};
use super::metric::{Metric, MetricResult, MetricSpec, Refused, WorstCase};
use super::reason::SpecError;
use greenlight_core::time::Timestamp;

/// A run as written: its metrics (arguments already substituted) and the names of those to run
/// dry (`*` matches any run of characters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSpec {
    pub metrics: Vec<MetricSpec>,
    pub dry_run: Vec<String>,
}

impl RunSpec {
    /// Validate every metric, the names and the dry-run rules. An invalid spec makes the run an
    /// Error before anything is measured.
    pub fn validate(&self) -> Result<Analysis, SpecError> {
        if self.metrics.is_empty() {
            return Err(SpecError::NoMetrics);
        }
        let mut metrics: Vec<Metric> = Vec::with_capacity(self.metrics.len());
        for spec in &self.metrics {
            let metric = spec.validate()?;
            if metrics.iter().any(|m| m.name() == metric.name()) {
                return Err(SpecError::DuplicateName {
                    name: metric.name().to_string(),
                });
            }
            metrics.push(metric);
        }
        for (i, rule) in self.dry_run.iter().enumerate() {
            if self.dry_run[..i].contains(rule) {
                return Err(SpecError::DuplicateDryRunRule { rule: rule.clone() });
            }
            if !metrics.iter().any(|m| glob_matches(rule, m.name())) {
                return Err(SpecError::DryRunMatchesNothing { rule: rule.clone() });
            }
        }
        let dry_run = metrics
            .iter()
            .map(|m| self.dry_run.iter().any(|rule| glob_matches(rule, m.name())))
            .collect();
        Ok(Analysis { metrics, dry_run })
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters (none too).
fn glob_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut i, mut j) = (0, 0);
    // The latest `*` seen and the name position it was tried at, to backtrack to.
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if i < p.len() && p[i] == n[j] {
            i += 1;
            j += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// A validated run: what a [`Run`] measures.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    metrics: Vec<Metric>,
    /// Parallel to `metrics`.
    dry_run: Vec<bool>,
}

impl Analysis {
    pub fn metrics(&self) -> &[Metric] {
        &self.metrics
    }

    pub fn is_dry_run(&self, name: &str) -> bool {
        self.metrics
            .iter()
            .zip(&self.dry_run)
            .any(|(m, dry)| *dry && m.name() == name)
    }

    /// The longest the run can take: its metrics run side by side, so the longest of theirs
    /// (dry-run ones included: the run waits for them too). Indefinite if any metric is.
    pub fn worst_case(&self, attempt_ms: i64) -> WorstCase {
        let mut longest = 0;
        for m in &self.metrics {
            match m.worst_case(attempt_ms) {
                WorstCase::Indefinite => return WorstCase::Indefinite,
                WorstCase::Bounded { ms } => longest = longest.max(ms),
            }
        }
        WorstCase::Bounded { ms: longest }
    }
}

/// How many metrics of a kind (dry-run or not) there are and how the completed ones ended
/// (Argo Rollouts' `runSummary` / `dryRunSummary`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub count: u32,
    pub successful: u32,
    pub failed: u32,
    pub inconclusive: u32,
    pub error: u32,
}

/// One run of an [`Analysis`]: the sans-IO state machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    results: Vec<MetricResult>,
    /// Parallel to `results`.
    dry_run: Vec<bool>,
    terminated: bool,
}

impl Run {
    /// Start the run at `now`: every metric's `initialDelay` counts from here.
    pub fn start(analysis: Analysis, now: Timestamp) -> Run {
        Run {
            results: analysis
                .metrics
                .into_iter()
                .map(|m| MetricResult::start(m, now))
                .collect(),
            dry_run: analysis.dry_run,
            terminated: false,
        }
    }

    pub fn results(&self) -> &[MetricResult] {
        &self.results
    }

    pub fn result(&self, name: &str) -> Option<&MetricResult> {
        self.results.iter().find(|r| r.name() == name)
    }

    pub fn is_dry_run(&self, name: &str) -> bool {
        self.index(name).is_some_and(|i| self.dry_run[i])
    }

    /// Whether the run stopped early: terminated by the caller, or by a metric that ended
    /// Failed, Error or Inconclusive.
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.results.iter().position(|r| r.name() == name)
    }

    /// The earliest moment a metric is due; `None` once every metric has completed.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.results.iter().filter_map(|r| r.next_due()).min()
    }

    /// The metrics due at `now`, in the run's order.
    pub fn due(&self, now: Timestamp) -> Vec<&str> {
        self.results
            .iter()
            .filter(|r| r.next_due().is_some_and(|at| at <= now))
            .map(|r| r.name())
            .collect()
    }

    /// Judge the provider's answer for `metric` by its conditions and record it.
    pub fn observe(
        &mut self,
        metric: &str,
        value: &ProviderValue,
        now: Timestamp,
    ) -> Result<(), Refused> {
        self.observe_all(&[(metric, value.clone())], now)
    }

    /// Judge the answers of several metrics queried together (those [`Self::due`] named) and
    /// record them as one step, as Argo Rollouts measures every due metric before it assesses
    /// the run: when two end the run at once, the worse decides, whatever their order here.
    pub fn observe_all(
        &mut self,
        values: &[(&str, ProviderValue)],
        now: Timestamp,
    ) -> Result<(), Refused> {
        let mut batch = Vec::with_capacity(values.len());
        for (name, value) in values {
            let i = self.recordable(name, &batch)?;
            batch.push((i, self.results[i].metric().measure(value)));
        }
        self.record_batch(batch, now)
    }

    /// Record a measurement of `metric` finished at `now`.
    pub fn record(&mut self, metric: &str, m: Measurement, now: Timestamp) -> Result<(), Refused> {
        self.record_all(vec![(metric, m)], now)
    }

    /// Record measurements of several metrics finished together, as one step (see
    /// [`Self::observe_all`]). Nothing is recorded when any of them is refused.
    pub fn record_all(
        &mut self,
        measurements: Vec<(&str, Measurement)>,
        now: Timestamp,
    ) -> Result<(), Refused> {
        let mut batch = Vec::with_capacity(measurements.len());
        for (name, m) in measurements {
            batch.push((self.recordable(name, &batch)?, m));
        }
        self.record_batch(batch, now)
    }

    /// The index of a metric that can take a measurement in a step already holding `batch`.
    fn recordable(&self, name: &str, batch: &[(usize, Measurement)]) -> Result<usize, Refused> {
        let i = self
            .index(name)
            .ok_or_else(|| Refused::UnknownMetric(name.to_string()))?;
        if let Some(a) = self.results[i].assessment() {
            return Err(Refused::Completed(a.phase()));
        }
        if batch.iter().any(|(j, _)| *j == i) {
            return Err(Refused::Twice(name.to_string()));
        }
        Ok(i)
    }

    fn record_batch(
        &mut self,
        batch: Vec<(usize, Measurement)>,
        now: Timestamp,
    ) -> Result<(), Refused> {
        for (i, m) in batch {
            self.results[i].record(m, now)?;
        }
        let decided = self.results.iter().zip(&self.dry_run).any(|(r, dry)| {
            !*dry
                && matches!(
                    r.phase(),
                    Phase::Failed | Phase::Error | Phase::Inconclusive
                )
        });
        if decided {
            self.terminate();
        }
        Ok(())
    }

    /// Stop the run: every metric not yet completed ends Successful (Argo Rollouts' terminate,
    /// as when a background analysis is stopped). The run is then the worst of its metrics.
    pub fn terminate(&mut self) {
        self.terminated = true;
        for r in &mut self.results {
            r.terminate();
        }
    }

    /// Running until every metric has completed; then the worst of the non-dry-run metrics in
    /// the order Successful < Running < Pending < Inconclusive < Error < Failed (Successful
    /// when every metric runs dry).
    pub fn phase(&self) -> Phase {
        if !self.results.iter().all(|r| r.is_completed()) {
            return Phase::Running;
        }
        self.deciding()
            .map(|r| r.phase())
            .reduce(Phase::worst)
            .unwrap_or(Phase::Successful)
    }

    /// Why the run ended other than Successful: the message of the first non-dry-run metric
    /// with the run's phase.
    pub fn message(&self) -> Option<String> {
        let phase = self.phase();
        if !phase.is_completed() || phase == Phase::Successful {
            return None;
        }
        self.deciding()
            .find(|r| r.phase() == phase)
            .and_then(|r| r.message())
    }

    fn deciding(&self) -> impl Iterator<Item = &MetricResult> {
        self.results
            .iter()
            .zip(&self.dry_run)
            .filter(|(_, dry)| !**dry)
            .map(|(r, _)| r)
    }

    /// The metrics that decide the run.
    pub fn summary(&self) -> Summary {
        self.summarize(false)
    }

    /// The dry-run metrics: measured and reported, never deciding.
    pub fn dry_run_summary(&self) -> Summary {
        self.summarize(true)
    }

    fn summarize(&self, dry: bool) -> Summary {
        let mut s = Summary::default();
        for (r, _) in self
            .results
            .iter()
            .zip(&self.dry_run)
            .filter(|(_, d)| **d == dry)
        {
            s.count += 1;
            match r.phase() {
                Phase::Successful => s.successful += 1,
                Phase::Failed => s.failed += 1,
                Phase::Inconclusive => s.inconclusive += 1,
                Phase::Error => s.error += 1,
                Phase::Pending | Phase::Running => {}
            }
        }
        s
    }
}

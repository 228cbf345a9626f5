//! `/metrics`: the server's counters in the Prometheus text format.
//!
//! Built on `prometheus-client`, the Prometheus organisation's own Rust
//! client: its types are plain atomics (a counter's increment is one
//! `fetch_add`, so a call pays nothing measurable), it needs no global
//! recorder or exporter thread, and it writes the classic text format
//! (0.0.4) that every Prometheus and its agents scrape. The `metrics` crate
//! would add a recorder installed at start and an exporter crate with its
//! own HTTP listener, which `serve` does not need: it already has routes.
//!
//! Two kinds of value live here. What happens (calls, their time, secrets
//! redacted, loggers restarted) is counted as it happens, in one registry
//! for the process. What *is* (sessions open, asks pending, bytes logged,
//! gaps) is looked up when a scrape asks, and only then: nothing is
//! polled for the metrics' sake.

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `Content-Type` of what [`encode`] writes.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// How long after its last call an agent still counts as active.
pub const ACTIVE_FOR: Duration = Duration::from_secs(300);

/// How many agents' last calls are kept at most (the oldest go first).
const AGENTS_KEPT: usize = 4096;

/// A call's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: &'static str,
    /// `ok`, `refused` (the server said no: a policy, another's text, a
    /// busy session) or `error`.
    outcome: &'static str,
}

/// A tool's label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: &'static str,
}

/// How a call ended, as the metrics count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The tool did what it was asked.
    Ok,
    /// The server refused it (nothing was done).
    Refused,
    /// It failed.
    Error,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Error => "error",
        }
    }
}

/// What the scrape looks up at the moment it asks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Sessions open (live panes of this server).
    pub sessions: i64,
    /// Asks of the policy waiting for a person.
    pub asks_pending: i64,
    /// Bytes in the open sessions' `raw.log`s.
    pub logged_bytes: i64,
    /// Gaps recorded in the open sessions' logs, and the bytes they lost.
    pub gaps: i64,
    /// Bytes of output the gaps lost.
    pub gap_bytes: i64,
}

/// The process's metrics.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    seconds: Family<ToolLabel, Histogram>,
    redactions: Counter,
    logger_restarts: Counter,
    waits: Gauge,
    agents: Gauge,
    sessions: Gauge,
    asks_pending: Gauge,
    logged_bytes: Gauge,
    gaps: Gauge,
    gap_bytes: Gauge,
    /// Each agent's last call, for the active agents.
    last_call: Mutex<HashMap<String, Instant>>,
    /// One encoding at a time, so the looked-up gauges are the scrape's own.
    scrape: Mutex<()>,
}

fn latency_histogram() -> Histogram {
    // 0.25 ms to about 2 minutes, doubling: `run true` at the bottom, a
    // long wait on top. The bounds are doubled by hand, not with
    // `exponential_buckets`: its `powf` was the router's only call into
    // libm, a shared library of half a megabyte mapped for it alone.
    Histogram::new((0..20).map(|i| 0.000_25 * f64::from(1u32 << i)))
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("dtmcp");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register("calls", "Tool calls, by tool and outcome", calls.clone());
        let seconds = Family::<ToolLabel, Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register("call_seconds", "Time from a call's arrival to its reply, by tool", seconds.clone());
        let redactions = Counter::default();
        registry.register("redactions", "Secrets kept out of replies", redactions.clone());
        let logger_restarts = Counter::default();
        registry.register("logger_restarts", "Pane loggers found dead and started again", logger_restarts.clone());
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let g = Gauge::<i64, AtomicI64>::default();
            registry.register(name, help, g.clone());
            g
        };
        let waits = gauge(&mut registry, "waits_in_progress", "Waits on a logger in progress (run, wait, expect)");
        let agents = gauge(&mut registry, "agents_active", "Agents with a call in the last five minutes");
        let sessions = gauge(&mut registry, "sessions_open", "Sessions open");
        let asks_pending = gauge(&mut registry, "policy_asks_pending", "Lines of the policy waiting for a person");
        let logged_bytes = gauge(&mut registry, "logged_bytes", "Bytes of output in the open sessions' logs");
        let gaps = gauge(&mut registry, "log_gaps", "Gaps recorded in the open sessions' logs");
        let gap_bytes = gauge(&mut registry, "log_gap_bytes", "Bytes of output the open sessions' gaps lost");
        Metrics {
            registry,
            calls,
            seconds,
            redactions,
            logger_restarts,
            waits,
            agents,
            sessions,
            asks_pending,
            logged_bytes,
            gaps,
            gap_bytes,
            last_call: Mutex::default(),
            scrape: Mutex::default(),
        }
    }

    /// Counts one call of `tool` by `actor`, which took `elapsed` and whose
    /// reply had `redacted` secrets kept out.
    pub fn call(&self, tool: &'static str, actor: Option<&str>, outcome: Outcome, elapsed: Duration, redacted: u32) {
        // Labels of static text: counting a call allocates nothing.
        self.calls.get_or_create(&CallLabels { tool, outcome: outcome.as_str() }).inc();
        self.seconds.get_or_create(&ToolLabel { tool }).observe(elapsed.as_secs_f64());
        if redacted > 0 {
            self.redactions.inc_by(u64::from(redacted));
        }
        if let Some(actor) = actor {
            let mut last = self.last_call.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(t) = last.get_mut(actor) {
                *t = Instant::now();
            } else {
                if last.len() >= AGENTS_KEPT {
                    forget_oldest(&mut last);
                }
                last.insert(actor.to_string(), Instant::now());
            }
        }
    }

    /// Counts a logger started again in place of a dead one.
    pub fn logger_restarted(&self) {
        self.logger_restarts.inc();
    }

    /// A wait on a logger, counted while the guard lives.
    pub fn wait(&self) -> WaitGuard<'_> {
        self.waits.inc();
        WaitGuard(self)
    }

    /// The metrics as text, with `now` for what is looked up at a scrape.
    pub fn encode(&self, now: Now) -> String {
        let _one = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        self.sessions.set(now.sessions);
        self.asks_pending.set(now.asks_pending);
        self.logged_bytes.set(now.logged_bytes);
        self.gaps.set(now.gaps);
        self.gap_bytes.set(now.gap_bytes);
        let active = {
            let mut last = self.last_call.lock().unwrap_or_else(|e| e.into_inner());
            last.retain(|_, t| t.elapsed() < ACTIVE_FOR);
            last.len()
        };
        self.agents.set(i64::try_from(active).unwrap_or(i64::MAX));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        text
    }
}

fn forget_oldest(last: &mut HashMap<String, Instant>) {
    if let Some(oldest) = last.iter().min_by_key(|(_, t)| **t).map(|(k, _)| k.clone()) {
        last.remove(&oldest);
    }
}

/// Counts a wait in progress until dropped.
pub struct WaitGuard<'a>(&'a Metrics);

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.waits.dec();
    }
}

/// The process's one set of metrics.
pub fn get() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, name: &str) -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()))
    }

    #[test]
    fn calls_are_counted_by_tool_and_outcome_with_their_time() {
        let m = Metrics::new();
        m.call("run", Some("a"), Outcome::Ok, Duration::from_millis(2), 0);
        m.call("run", Some("b"), Outcome::Ok, Duration::from_millis(3), 2);
        m.call("run", Some("a"), Outcome::Refused, Duration::from_millis(1), 0);
        let text = m.encode(Now { sessions: 3, ..Now::default() });
        assert_eq!(sample(&text, r#"dtmcp_calls_total{tool="run",outcome="ok"}"#), Some(2.0), "{text}");
        assert_eq!(sample(&text, r#"dtmcp_calls_total{tool="run",outcome="refused"}"#), Some(1.0), "{text}");
        assert_eq!(sample(&text, r#"dtmcp_call_seconds_count{tool="run"}"#), Some(3.0), "{text}");
        assert_eq!(sample(&text, "dtmcp_redactions_total"), Some(2.0), "{text}");
        assert_eq!(sample(&text, "dtmcp_agents_active"), Some(2.0), "{text}");
        assert_eq!(sample(&text, "dtmcp_sessions_open"), Some(3.0), "{text}");
        assert!(text.contains("# TYPE dtmcp_call_seconds histogram"), "{text}");
    }

    #[test]
    fn a_wait_counts_while_it_lasts() {
        let m = Metrics::new();
        let g = m.wait();
        assert_eq!(sample(&m.encode(Now::default()), "dtmcp_waits_in_progress"), Some(1.0));
        drop(g);
        assert_eq!(sample(&m.encode(Now::default()), "dtmcp_waits_in_progress"), Some(0.0));
    }

    #[test]
    fn the_agents_kept_are_bounded() {
        let m = Metrics::new();
        for i in 0..AGENTS_KEPT + 10 {
            m.call("read", Some(&format!("agent{i}")), Outcome::Ok, Duration::ZERO, 0);
        }
        assert_eq!(m.last_call.lock().map(|l| l.len()).unwrap_or(0), AGENTS_KEPT);
    }
}

//! Prometheus metrics for `forkvm serve`, served on the admin listener.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: &'static str,
}

/// Every metric the server keeps.
pub struct Metrics {
    registry: Registry,
    pub requests: Family<StatusLabel, Counter>,
    pub errors: Family<KindLabel, Counter>,
    pub latency: Histogram,
    pub resets: Counter,
    pub workers: Gauge,
    rss: Gauge,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("forkvm");
        let requests = Family::<StatusLabel, Counter>::default();
        let errors = Family::<KindLabel, Counter>::default();
        let latency = Histogram::new(exponential_buckets(0.000_025, 2.0, 18));
        let resets = Counter::default();
        let workers = Gauge::default();
        let rss = Gauge::default();
        registry.register(
            "requests",
            "HTTP requests answered, by status",
            requests.clone(),
        );
        registry.register("errors", "Requests that failed, by kind", errors.clone());
        registry.register(
            "request_duration_seconds",
            "Time from receiving a request to answering it",
            latency.clone(),
        );
        registry.register("resets", "Worker VM resets", resets.clone());
        registry.register("workers_live", "Worker VMs running", workers.clone());
        registry.register(
            "memory_rss_bytes",
            "Resident memory of the server",
            rss.clone(),
        );
        Self {
            registry,
            requests,
            errors,
            latency,
            resets,
            workers,
            rss,
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let rss_pages = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<i64>().ok())
            .unwrap_or(0);
        self.rss.set(rss_pages * 4096);
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

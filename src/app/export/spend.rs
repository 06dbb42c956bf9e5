//! What the reports say of a sample's code change and of what its agent spent (shared by
//! the table, summary.md, results.csv, the page and `compare`).

use crate::core::records::SampleReport;
use crate::core::spend::{SpendTotals, Usage, dollars_text};
use crate::core::summary::Summary;

/// Whether any sample's row says what its agent spent.
pub fn with_agents(summary: &Summary) -> bool {
    summary.totals.agents.is_some()
}

/// "2 files +10 -3", or "-" (an older report, or no patch).
pub fn change_cell(s: &SampleReport) -> String {
    match &s.change {
        Some(c) if c.files > 0 => format!(
            "{} file{} +{} -{}",
            c.files,
            if c.files == 1 { "" } else { "s" },
            c.added,
            c.removed
        ),
        Some(_) => "none".into(),
        None => "-".into(),
    }
}

/// "$0.0213, 12 req, 3400+800 tok", or "-" for a sample whose row says nothing.
pub fn spend_cell(s: &SampleReport) -> String {
    let Some(a) = &s.agent else {
        return "-".into();
    };
    let u = &a.usage;
    let mut cell = format!(
        "{}, {} req, {}+{} tok",
        dollars_text(u.dollars()),
        u.requests,
        u.input_tokens + u.cache_read_tokens + u.cache_write_tokens,
        u.output_tokens
    );
    if u.retries > 0 {
        cell.push_str(&format!(", {} API retr{}", u.retries, plural_y(u.retries)));
    }
    if u.refused_over_budget > 0 {
        cell.push_str(", budget spent");
    }
    cell
}

/// One sample's spend in words, for its drill-down.
pub fn usage_words(u: &Usage, seconds: Option<f64>) -> String {
    format!(
        "{} request(s) ({} failed by the provider), {} input, {} output, {} cache-read and {} \
         cache-write tokens, {}{}{}",
        u.requests,
        u.api_errors,
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        dollars_text(u.dollars()),
        seconds
            .map(|s| format!(", agent time {s:.1} s"))
            .unwrap_or_default(),
        if u.retries > 0 {
            format!(
                "; over {} attempts ({} failed for an API reason and were retried)",
                u.retries + 1,
                u.retries
            )
        } else {
            String::new()
        }
    ) + if u.refused_over_budget > 0 {
        "; its budget was spent (--max-cost): the gateway refused its further requests"
    } else {
        ""
    }
}

/// The run's line: "agents: 6 samples, 24 requests (1 failed), ...".
pub fn totals_line(t: &SpendTotals) -> String {
    let mut line = format!(
        "agents: {} sample(s), {} request(s) ({} failed by the provider, {} API retr{}), {} \
         input + {} output tokens ({} cache read, {} cache write), {}, agent time {:.0} s",
        t.samples,
        t.requests,
        t.api_errors,
        t.retries,
        plural_y(t.retries),
        t.input_tokens,
        t.output_tokens,
        t.cache_read_tokens,
        t.cache_write_tokens,
        dollars_text(t.cost_usd),
        t.agent_seconds
    );
    if t.unknown_cost_samples > 0 {
        line.push_str(&format!(
            " ({} sample(s) with a cost the price table cannot give)",
            t.unknown_cost_samples
        ));
    }
    line
}

fn plural_y(n: u64) -> &'static str {
    if n == 1 { "y" } else { "ies" }
}

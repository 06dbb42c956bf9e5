//! `results.csv`: one row per sample, for spreadsheets.

use super::{Exporter, Summary};
use crate::store::run_folder::names;

/// `results.csv`.
pub struct ResultsCsv;

impl Exporter for ResultsCsv {
    fn files(&self, summary: &Summary) -> anyhow::Result<Vec<super::ReportFile>> {
        super::single(names::RESULTS_CSV, results_csv(summary).into_bytes())
    }
}

/// RFC 4180: a field with a comma, quote, or line break (`\n` or `\r`) is quoted.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `results.csv`: one row per sample.
pub fn results_csv(summary: &Summary) -> String {
    let mut out = String::from(
        "instance_id,sample,status,apply_strategy,opt_base,opt_commit,inconclusive,gm_speedup_patch_base,gm_ci_lo,gm_ci_hi,hm_speedup_patch_commit,hm_ci_lo,hm_ci_hi,base_mean,patch_mean,commit_mean,measured_rounds,energy_base_j,energy_patch_j,energy_base_over_patch,files_changed,lines_added,lines_removed,agent_requests,agent_api_errors,agent_retries,agent_input_tokens,agent_output_tokens,agent_cache_read_tokens,agent_cache_write_tokens,agent_cost_usd,agent_seconds,detail\n",
    );
    for inst in &summary.instances {
        for s in &inst.samples {
            let num = |f: fn(&crate::core::metrics::OptStats) -> f64| {
                s.opt_stats
                    .as_ref()
                    .map(|st| format!("{}", f(st)))
                    .unwrap_or_default()
            };
            let ci = |f: fn(&crate::core::stats::SpeedupIntervals) -> f64| {
                s.intervals
                    .as_ref()
                    .map(|iv| format!("{}", f(iv)))
                    .unwrap_or_default()
            };
            let energy = |f: fn(&crate::core::timings::EnergySummary) -> f64| {
                s.energy
                    .as_ref()
                    .map(|e| format!("{}", f(e)))
                    .unwrap_or_default()
            };
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                csv_field(&inst.instance_id),
                s.sample,
                s.status,
                csv_field(s.apply_strategy.as_deref().unwrap_or("")),
                s.opt_base,
                s.opt_commit,
                s.inconclusive,
                num(|x| x.gm_speedup_patch_base),
                ci(|iv| iv.gm_speedup_patch_base.lo),
                ci(|iv| iv.gm_speedup_patch_base.hi),
                num(|x| x.hm_speedup_patch_commit),
                ci(|iv| iv.hm_speedup_patch_commit.lo),
                ci(|iv| iv.hm_speedup_patch_commit.hi),
                num(|x| x.base_mean),
                num(|x| x.patch_mean),
                num(|x| x.commit_mean),
                s.measured_rounds,
                energy(|e| e.base_j),
                energy(|e| e.patch_j),
                energy(|e| e.base_over_patch),
                change_and_spend(s),
                csv_field(&s.detail)
            ));
        }
    }
    out
}

/// The change's and the agent's columns (empty where the report does not say).
fn change_and_spend(s: &crate::core::records::SampleReport) -> String {
    let mut cells: Vec<String> = match &s.change {
        Some(c) => [c.files, c.added, c.removed]
            .iter()
            .map(usize::to_string)
            .collect(),
        None => vec![String::new(); 3],
    };
    match &s.agent {
        Some(a) => {
            let u = &a.usage;
            cells.extend(
                [
                    u.requests,
                    u.api_errors,
                    u.retries,
                    u.input_tokens,
                    u.output_tokens,
                    u.cache_read_tokens,
                    u.cache_write_tokens,
                ]
                .iter()
                .map(u64::to_string),
            );
            cells.push(u.dollars().map(|d| d.to_string()).unwrap_or_default());
            cells.push(a.seconds.map(|d| d.to_string()).unwrap_or_default());
        }
        None => cells.extend(vec![String::new(); 9]),
    }
    cells.join(",")
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn fields_with_separators_or_line_breaks_are_quoted() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("line\nbreak"), "\"line\nbreak\"");
        // A lone carriage return ends a record for spreadsheet readers too.
        assert_eq!(csv_field("carriage\rreturn"), "\"carriage\rreturn\"");
    }
}

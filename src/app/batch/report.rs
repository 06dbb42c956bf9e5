//! batch.json and the batch's tables (terminal and summary.md).

use serde::Serialize;

use super::{EntryResult, Group};

/// batch.json.
#[derive(Debug, Clone, Serialize)]
pub struct BatchReport {
    pub schema_version: u32,
    pub name: String,
    pub config: String,
    pub batch_dir: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Every entry complete.
    pub complete: bool,
    pub interrupted: Option<String>,
    pub exit_code: i32,
    pub comparable: bool,
    pub groups: Vec<Group>,
    pub notes: Vec<String>,
    /// In ranking order.
    pub entries: Vec<EntryResult>,
}

fn pct_ci(v: f64, ci: [f64; 2]) -> String {
    format!("{v:.2}% [{:.2}, {:.2}]", ci[0], ci[1])
}

/// The rows of the table: (header, cells per entry).
fn table(report: &BatchReport) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header: Vec<String> = ["rank", "entry", "model", "K"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if !report.comparable {
        header.insert(0, "group".into());
    }
    header.extend(
        ["Opt@K", "pass@1", "pass@K", "opt_commit", "state"]
            .iter()
            .map(|s| s.to_string()),
    );
    let agents = report
        .entries
        .iter()
        .any(|e| e.figures.as_ref().is_some_and(|f| f.agents.is_some()));
    if agents {
        header.extend(["agent time", "requests", "tokens", "cost"].map(String::from));
    }
    let rows = report
        .entries
        .iter()
        .map(|e| {
            let mut cells = vec![
                e.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
                e.label.clone(),
                e.model.clone(),
                e.k.to_string(),
            ];
            if !report.comparable {
                cells.insert(0, e.group.to_string());
            }
            match &e.figures {
                Some(f) => cells.extend([
                    pct_ci(f.opt_at_k, f.opt_at_k_ci),
                    pct_ci(f.pass_at_1, f.pass_at_1_ci),
                    pct_ci(f.pass_at_k, f.pass_at_k_ci),
                    format!("{} of {}", f.opt_commit, f.instances),
                ]),
                None => cells.extend(["-", "-", "-", "-"].map(String::from)),
            }
            cells.push(e.state.as_str().to_string());
            if agents {
                cells.extend(spend_cells(
                    e.figures.as_ref().and_then(|f| f.agents.as_ref()),
                ));
            }
            cells
        })
        .collect();
    (header, rows)
}

/// An entry's agents' wall time, requests, tokens and dollars ("-" where it does not say).
fn spend_cells(t: Option<&crate::core::spend::SpendTotals>) -> [String; 4] {
    match t {
        Some(t) => [
            format!("{:.0} s", t.agent_seconds),
            t.requests.to_string(),
            t.tokens_text(),
            crate::core::spend::dollars_text(t.cost_usd),
        ],
        None => ["-", "-", "-", "-"].map(String::from),
    }
}

fn footer(report: &BatchReport) -> String {
    let ranked = report.entries.iter().filter(|e| e.rank.is_some()).count();
    format!(
        "batch {}: {} entr{}, {} complete and ranked{}; Opt@K and pass@k in percent with their 95% intervals over instances (as each entry's reports give them)",
        report.name,
        report.entries.len(),
        if report.entries.len() == 1 {
            "y"
        } else {
            "ies"
        },
        ranked,
        match &report.interrupted {
            Some(sig) => format!(", interrupted by {sig}"),
            None => String::new(),
        }
    )
}

/// The table printed at the end of a batch.
pub fn terminal_table(report: &BatchReport) -> String {
    let (header, rows) = table(report);
    let cells: Vec<&[String]> = rows.iter().map(Vec::as_slice).collect();
    let mut out = crate::app::export::columns(&header, &cells);
    out.push('\n');
    out.push_str(&crate::core::text::for_terminal(&footer(report)));
    out.push('\n');
    for n in &report.notes {
        out.push_str(&format!("note: {}\n", crate::core::text::for_terminal(n)));
    }
    out
}

/// `summary.md` of the batch folder; names, labels and notes (which can quote an error)
/// go through `core::text::for_markdown`.
pub fn summary_markdown(report: &BatchReport) -> String {
    use crate::core::text::for_markdown as md;
    let (header, rows) = table(report);
    let mut out = format!(
        "# Batch {}{}\n\n",
        md(&report.name),
        if report.complete { "" } else { " (partial)" }
    );
    out.push_str(&format!("{}\n\n", md(&footer(report))));
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| md(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    if !report.notes.is_empty() {
        out.push('\n');
        for n in &report.notes {
            out.push_str(&format!("- {}\n", md(n)));
        }
    }
    out.push_str(
        "\nEach entry's own reports (summary.md, report.json files) are in its folder:\n\n",
    );
    for e in &report.entries {
        out.push_str(&format!("- {}: {}/\n", md(&e.label), md(&e.run_id)));
    }
    out
}

//! `harness compare`'s terminal output.

use std::fmt::Write;

use super::Comparison;
use crate::core::compare::Winner;

pub fn render(c: &Comparison) -> String {
    let mut out = format!(
        "Comparing {} runs on {} shared instance(s)\n\n",
        c.contenders.len(),
        c.shared_instances.len()
    );
    let header: Vec<String> = [
        "rank",
        "rank interval",
        "run",
        "Opt@K",
        "shared opt",
        "P(first)",
        "pass@1",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let agents = c.contenders.iter().any(|ct| ct.agents.is_some());
    let mut header = header;
    if agents {
        header.extend([
            "agents' cost".to_string(),
            "requests".into(),
            "tokens".into(),
        ]);
    }
    let mut rows = Vec::new();
    for i in c.by_rank() {
        let ct = &c.contenders[i];
        let (rank, interval, first) = match &ct.rank {
            Some(r) => (
                r.rank.to_string(),
                format!("[{}, {}]", r.rank_interval[0], r.rank_interval[1]),
                format!("{:.0}%", r.first_share * 100.0),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        // Labels are what tell two runs of one id apart: shown whole, up to 100 characters.
        let mut row = vec![
            rank,
            interval,
            truncate(&ct.label, 100),
            format!("{:.2}%", ct.opt_at_k),
            format!("{}/{}", ct.shared_opt_commit, c.shared_instances.len()),
            first,
            format!(
                "{:.2}%",
                ct.pass_at_k.first().copied().unwrap_or(0.0) * 100.0
            ),
        ];
        if agents {
            row.extend(spend_cells(ct.agents.as_ref()));
        }
        rows.push(row);
    }
    out.push_str(&crate::app::table::render(
        &header,
        &rows,
        &[3, 4, 5, 6, 7, 8, 9],
    ));
    let _ = writeln!(
        out,
        "\nPer task (A over B: A's speedup over its base divided by B's; {:.0}% interval \
         with a spread of {:.1}% between runs of the same code added, so a \"faster\" is one \
         a second run would not undo):",
        c.confidence * 100.0,
        c.between_run_sd * 100.0
    );
    for t in &c.tasks {
        for p in &t.pairs {
            let (a, b) = (&c.contenders[p.first].label, &c.contenders[p.second].label);
            let ratio = p
                .result
                .ratio
                .as_ref()
                .map(|iv| format!("{:.2}x [{:.2}, {:.2}]", iv.estimate, iv.lo, iv.hi))
                .unwrap_or_else(|| "-".into());
            let who = match p.result.winner {
                Winner::First => a.as_str(),
                Winner::Second => b.as_str(),
                Winner::Tie => "tie",
                Winner::Neither => "neither",
            };
            let _ = writeln!(
                out,
                "  {:<28} {} vs {}: {:<22} {} ({})",
                truncate(&t.instance_id, 28),
                a,
                b,
                ratio,
                who,
                p.result.reason
            );
        }
    }
    for t in &c.tallies {
        let _ = writeln!(
            out,
            "\n{} vs {}: {} win(s), {} loss(es), {} tie(s), {} where neither passed",
            c.contenders[t.first].label,
            c.contenders[t.second].label,
            t.wins,
            t.losses,
            t.ties,
            t.neither
        );
    }
    if !c.differences.is_empty() {
        out.push_str("\nWhat differs between the runs:\n");
        for d in &c.differences {
            let _ = writeln!(out, "  {}: {}", d.field, d.values.join(" | "));
        }
    }
    for n in &c.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// A run's agents' cost, requests and tokens ("-" where its rows do not say).
pub(super) fn spend_cells(t: Option<&crate::core::spend::SpendTotals>) -> [String; 3] {
    match t {
        Some(t) => [
            crate::core::spend::dollars_text(t.cost_usd),
            t.requests.to_string(),
            t.tokens_text(),
        ],
        None => ["-".into(), "-".into(), "-".into()],
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

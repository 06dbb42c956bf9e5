//! `harness compare --html FILE`: the comparison as one self-contained page, built from the
//! same parts as `report.html`.

use std::fmt::Write;

use super::Comparison;
use crate::app::export::html::svg;
use crate::app::export::html::{Cell, Table, document, esc, headers};
use crate::core::compare::Winner;

pub fn page(c: &Comparison) -> String {
    document("harness compare", &body(c))
}

/// The comparison's sections, for a page of its own or the batch's.
pub fn body(c: &Comparison) -> String {
    let mut body = format!(
        "<h1>Comparison <span class=\"muted\">· {} runs, {} shared instance(s)</span></h1>",
        c.contenders.len(),
        c.shared_instances.len()
    );
    for n in &c.notes {
        let _ = write!(body, "<p class=\"banner\">{}</p>", esc(n));
    }
    body.push_str(&ranking(c));
    body.push_str(&curves(c));
    body.push_str(&per_task(c));
    body.push_str(&differences(c));
    body
}

fn ranking(c: &Comparison) -> String {
    let agents = c.contenders.iter().any(|ct| ct.agents.is_some());
    let rows = c
        .by_rank()
        .iter()
        .map(|&i| {
            let ct = &c.contenders[i];
            let r = ct.rank.as_ref();
            let mut row = vec![
                Cell::num(
                    r.map_or("-".into(), |r| r.rank.to_string()),
                    r.map_or(f64::NAN, |r| r.rank as f64),
                ),
                Cell::text(&r.map_or("-".into(), |r| {
                    format!("[{}, {}]", r.rank_interval[0], r.rank_interval[1])
                })),
                Cell::text(&ct.label),
                Cell::num(format!("{:.2}%", ct.opt_at_k), ct.opt_at_k),
                Cell::num(
                    format!("{} / {}", ct.shared_opt_commit, c.shared_instances.len()),
                    ct.shared_opt_commit as f64,
                ),
                Cell::num(
                    r.map_or("-".into(), |r| format!("{:.0}%", r.first_share * 100.0)),
                    r.map_or(f64::NAN, |r| r.first_share),
                ),
                Cell::text(&ct.criterion),
                Cell::text(if ct.complete { "complete" } else { "partial" }),
            ];
            if agents {
                let [cost, requests, tokens] = super::text::spend_cells(ct.agents.as_ref());
                let sort = ct
                    .agents
                    .as_ref()
                    .and_then(|a| a.cost_usd)
                    .unwrap_or(f64::NAN);
                row.push(Cell::num(cost, sort));
                row.push(Cell::text(&requests));
                row.push(Cell::text(&tokens));
            }
            row[2].attrs = format!(" data-contender=\"{}\"", esc(&ct.label));
            row
        })
        .collect();
    let table = Table {
        caption: format!(
            "Ranked by Opt@K on the shared instances; the rank interval is the {:.0}% range of ranks over bootstrap resamples of those instances",
            c.confidence * 100.0
        ),
        headers: headers(
            &[
                "rank",
                "rank interval",
                "run",
                "Opt@K (own instances)",
                "opt_commit (shared)",
                "ranked first",
                "criterion",
                "state",
                "agents' cost",
                "requests",
                "tokens",
            ][..if agents { 11 } else { 8 }],
        ),
        rows,
        sortable: true,
    };
    format!(
        "<h2>Ranking</h2><div id=\"ranking\">{}</div>",
        table.render()
    )
}

fn curves(c: &Comparison) -> String {
    let k = c
        .contenders
        .iter()
        .map(|ct| ct.pass_at_k.len())
        .max()
        .unwrap_or(0);
    let mut headers = vec!["run".to_string()];
    for i in 1..=k {
        headers.push(format!("pass@{i}"));
    }
    for i in 1..=k {
        headers.push(format!("opt@{i}"));
    }
    let rows = c
        .contenders
        .iter()
        .map(|ct| {
            let mut row = vec![Cell::text(&ct.label)];
            for series in [&ct.pass_at_k, &ct.opt_at_k_curve] {
                for i in 0..k {
                    row.push(match series.get(i) {
                        Some(v) => Cell::num(format!("{:.2}%", v * 100.0), *v),
                        None => Cell::text("-"),
                    });
                }
            }
            row
        })
        .collect();
    format!(
        "<h2>pass@k and opt@k per run</h2>{}",
        Table {
            caption: "over each run's own instances, as its reports give them".into(),
            headers,
            rows,
            sortable: false,
        }
        .render()
    )
}

fn per_task(c: &Comparison) -> String {
    let axis = svg::LogAxis::spanning(
        c.tasks
            .iter()
            .flat_map(|t| &t.pairs)
            .filter_map(|p| p.result.ratio.as_ref())
            .flat_map(|iv| [iv.lo, iv.hi]),
        150.0,
    );
    let mut rows = Vec::new();
    for t in &c.tasks {
        for p in &t.pairs {
            let (a, b) = (&c.contenders[p.first].label, &c.contenders[p.second].label);
            let who = match p.result.winner {
                Winner::First => a.clone(),
                Winner::Second => b.clone(),
                Winner::Tie => "tie".into(),
                Winner::Neither => "neither".into(),
            };
            let ratio = match &p.result.ratio {
                Some(iv) => {
                    let text = format!("{:.2}x [{:.2}, {:.2}]", iv.estimate, iv.lo, iv.hi);
                    let mark = svg::Mark {
                        estimate: iv.estimate,
                        interval: Some((iv.lo, iv.hi)),
                        decided: p.result.winner != Winner::Tie,
                    };
                    let label = format!("{a} over {b}: {text}");
                    Cell {
                        html: format!(
                            "<span class=\"figure\">{}</span>{}",
                            esc(&text),
                            svg::interval_mark(&axis, mark, 1.0, &label)
                        ),
                        sort: Some(iv.estimate.to_string()),
                        class: "num",
                        attrs: String::new(),
                    }
                }
                None => Cell::num("-".into(), f64::NAN),
            };
            let outcome = |i: usize| {
                let o = &t.outcomes[i];
                Cell::text(&format!(
                    "{}{}{}{}",
                    o.status,
                    o.speedup_over_base
                        .map(|s| format!(", {s:.2}x over base"))
                        .unwrap_or_default(),
                    if o.opt_commit { ", opt_commit" } else { "" },
                    o.agents
                        .as_ref()
                        .map(|a| format!(
                            ", agent {}",
                            crate::core::spend::dollars_text(a.cost_usd)
                        ))
                        .unwrap_or_default()
                ))
            };
            // Labels, outcomes and reasons wrap: the table fits 1280 px with two long labels.
            let wrap = |c: Cell| Cell {
                class: "wrap narrow",
                ..c
            };
            let mut row = vec![
                Cell::text(&t.instance_id),
                wrap(Cell::text(a)),
                wrap(outcome(p.first)),
                wrap(Cell::text(b)),
                wrap(outcome(p.second)),
                ratio,
                wrap(Cell::text(&who)),
                Cell {
                    class: "wrap",
                    ..Cell::text(&p.result.reason)
                },
            ];
            row[0].attrs = format!(" data-instance=\"{}\"", esc(&t.instance_id));
            rows.push(row);
        }
    }
    let tallies: String = c
        .tallies
        .iter()
        .map(|t| {
            format!(
                "<li>{} vs {}: {} win(s), {} loss(es), {} tie(s), {} where neither passed</li>",
                esc(&c.contenders[t.first].label),
                esc(&c.contenders[t.second].label),
                t.wins,
                t.losses,
                t.ties,
                t.neither
            )
        })
        .collect();
    format!(
        "<h2>Per task</h2><ul>{tallies}</ul><div id=\"tasks\">{}</div>",
        Table {
            caption: "A over B: A's speedup over its own base divided by B's, with the interval from resampling each run's rounds; a winner only when the whole interval is on one side of 1".into(),
            headers: headers(&["instance", "A", "A's sample", "B", "B's sample", "A over B", "faster", "why"]),
            rows,
            sortable: true,
        }
        .render()
    )
}

fn differences(c: &Comparison) -> String {
    if c.differences.is_empty() {
        return "<h2>Settings</h2><p>The runs share machine, criterion, thresholds, K, dataset and harness.</p>".into();
    }
    let mut headers = vec!["setting".to_string()];
    headers.extend(c.contenders.iter().map(|ct| esc(&ct.label)));
    let rows = c
        .differences
        .iter()
        .map(|d| {
            let mut row = vec![Cell::text(&d.field)];
            row.extend(d.values.iter().map(|v| {
                let mut cell = Cell::text(v);
                cell.class = "wrap";
                cell
            }));
            row
        })
        .collect();
    format!(
        "<h2>What differs between the runs</h2>{}",
        Table {
            caption: String::new(),
            headers,
            rows,
            sortable: false,
        }
        .render()
    )
}

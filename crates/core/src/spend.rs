//! What an agent spent on its model, as plain data: the tokens each answer reported, the
//! requests, the provider's failures, and the dollars by a price table (dollars per million
//! tokens). The harness's gateway counts them (`app::gateway`); samples' reports, the run's
//! summary, the page and `compare` show them. A cost the table cannot price is unknown,
//! never zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Dollars per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: Option<f64>,
    #[serde(default)]
    pub cache_write: Option<f64>,
}

/// Prices by model name (agents.toml's `[price."MODEL"]`).
pub type Prices = BTreeMap<String, Price>;

/// The tokens of one response, as the provider counted them (input excludes cached input).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// What one sample's agent spent through the gateway (over every attempt of the sample:
/// an attempt that failed for an API reason is retried, and what it spent is added).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Earlier attempts of this sample that failed for an API reason and were retried.
    #[serde(default)]
    pub retries: u64,
    /// Requests forwarded to the provider (refused ones are not).
    pub requests: u64,
    /// Of those, the ones the provider failed (429, 5xx, 529 overloaded, no connection).
    pub api_errors: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// Dollars by the price table; `None` when a model answered that the table does not
    /// price (never a guess, never zero for unknown).
    pub cost_usd: Option<f64>,
    /// Models that answered, and those of them the table does not price.
    pub models: Vec<String>,
    pub unpriced_models: Vec<String>,
    /// The last API failure the provider gave ("429 rate_limit_error ..."), if any.
    pub last_api_error: Option<String>,
    /// Whether the last request the agent made failed for an API reason.
    pub ended_on_api_error: bool,
    /// Requests refused because the sample's budget was spent.
    pub refused_over_budget: u64,
    /// Answers that reported no usage (their cost is unknown).
    #[serde(default)]
    pub unreported: u64,
    /// Answers still streaming when the gateway stopped (their cost is unknown).
    #[serde(default)]
    pub in_flight: u64,
}

impl Usage {
    /// The dollars, when every answer was counted and priced.
    pub fn known_cost(&self) -> Option<f64> {
        if self.unreported > 0 || self.in_flight > 0 {
            return None;
        }
        self.cost_usd
    }
}

impl Usage {
    /// Adds one answered request of `model` with `tokens`.
    pub fn add(&mut self, model: &str, tokens: &Tokens, prices: &Prices) {
        self.input_tokens += tokens.input;
        self.output_tokens += tokens.output;
        self.cache_read_tokens += tokens.cache_read;
        self.cache_write_tokens += tokens.cache_write;
        if !model.is_empty() && !self.models.iter().any(|m| m == model) {
            self.models.push(model.to_string());
        }
        match price_of(prices, model) {
            Some(p) if self.unpriced_models.is_empty() => {
                *self.cost_usd.get_or_insert(0.0) += cost(p, tokens);
            }
            Some(_) => {}
            None => {
                if !self.unpriced_models.iter().any(|m| m == model) {
                    self.unpriced_models.push(model.to_string());
                }
                self.cost_usd = None;
            }
        }
    }
}

/// A model's price: its exact name, else a dated snapshot of a name in the table
/// ("claude-sonnet-4-5-20250929" or "gpt-5-2025-08-07" priced as the name); never a longer
/// name that merely starts with one ("gpt-5-pro" is not "gpt-5").
pub fn price_of<'a>(prices: &'a Prices, model: &str) -> Option<&'a Price> {
    prices.get(model).or_else(|| {
        prices.iter().find_map(|(name, p)| {
            let date = model.strip_prefix(name.as_str())?.strip_prefix('-')?;
            let digits = date.chars().filter(char::is_ascii_digit).count();
            (digits == 8 && date.chars().all(|c| c.is_ascii_digit() || c == '-')).then_some(p)
        })
    })
}

fn cost(p: &Price, t: &Tokens) -> f64 {
    let per = |n: u64, dollars: f64| n as f64 * dollars / 1e6;
    per(t.input, p.input)
        + per(t.output, p.output)
        + per(t.cache_read, p.cache_read.unwrap_or(p.input))
        + per(t.cache_write, p.cache_write.unwrap_or(p.input))
}

impl Usage {
    /// The dollars: `None` when an answer was not counted or not priced; zero when nothing
    /// was priced because nothing was answered.
    pub fn dollars(&self) -> Option<f64> {
        if self.unreported > 0 || self.in_flight > 0 || !self.unpriced_models.is_empty() {
            return None;
        }
        Some(self.cost_usd.unwrap_or(0.0))
    }

    /// Adds a later attempt of the same sample: counts add up, the outcome is the later's.
    pub fn absorb(&mut self, later: &Usage) {
        let dollars = self.dollars().zip(later.dollars()).map(|(a, b)| a + b);
        self.retries += later.retries;
        self.requests += later.requests;
        self.api_errors += later.api_errors;
        self.input_tokens += later.input_tokens;
        self.output_tokens += later.output_tokens;
        self.cache_read_tokens += later.cache_read_tokens;
        self.cache_write_tokens += later.cache_write_tokens;
        self.refused_over_budget += later.refused_over_budget;
        self.unreported += later.unreported;
        self.in_flight += later.in_flight;
        for m in &later.models {
            if !self.models.contains(m) {
                self.models.push(m.clone());
            }
        }
        for m in &later.unpriced_models {
            if !self.unpriced_models.contains(m) {
                self.unpriced_models.push(m.clone());
            }
        }
        self.cost_usd = dollars;
        self.last_api_error = later.last_api_error.clone().or(self.last_api_error.take());
        self.ended_on_api_error = later.ended_on_api_error;
    }
}

/// What one sample's agent spent, as its predictions row carries it (`agent_usage`,
/// `agent_seconds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentSpend {
    pub usage: Usage,
    /// The agent's wall time, over its attempts.
    pub seconds: Option<f64>,
}

/// What a run's agents spent, over the samples whose rows say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendTotals {
    /// Samples whose rows carry what their agent spent.
    pub samples: usize,
    pub requests: u64,
    pub api_errors: u64,
    pub retries: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// Dollars over those samples; `None` when one of them has an unknown cost.
    pub cost_usd: Option<f64>,
    /// Samples whose cost is unknown (a model the table does not price, an answer that
    /// reported no usage).
    pub unknown_cost_samples: usize,
    /// Samples with an answer whose tokens were not reported (no usage, or still streaming
    /// when the agent ended): the token counts are then at least what they say.
    #[serde(default)]
    pub unknown_token_samples: usize,
    pub agent_seconds: f64,
}

impl SpendTotals {
    /// The totals of `spends`; `None` when no sample says what it spent.
    pub fn of<'a>(spends: impl IntoIterator<Item = &'a AgentSpend>) -> Option<SpendTotals> {
        let mut t = SpendTotals {
            cost_usd: Some(0.0),
            ..SpendTotals::default()
        };
        for s in spends {
            let u = &s.usage;
            t.samples += 1;
            t.requests += u.requests;
            t.api_errors += u.api_errors;
            t.retries += u.retries;
            t.input_tokens += u.input_tokens;
            t.output_tokens += u.output_tokens;
            t.cache_read_tokens += u.cache_read_tokens;
            t.cache_write_tokens += u.cache_write_tokens;
            t.agent_seconds += s.seconds.unwrap_or(0.0);
            if u.unreported > 0 || u.in_flight > 0 {
                t.unknown_token_samples += 1;
            }
            match u.dollars() {
                Some(d) => t.cost_usd = t.cost_usd.map(|c| c + d),
                None => {
                    t.unknown_cost_samples += 1;
                    t.cost_usd = None;
                }
            }
        }
        (t.samples > 0).then_some(t)
    }

    /// All tokens, cached ones included.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// The tokens as text: "≥N" when some answers did not report theirs.
    pub fn tokens_text(&self) -> String {
        if self.unknown_token_samples > 0 {
            format!("≥{}", self.tokens())
        } else {
            self.tokens().to_string()
        }
    }
}

/// "$0.0213", or "cost unknown" (never a guess).
pub fn dollars_text(cost: Option<f64>) -> String {
    match cost {
        Some(c) => format!("${c:.4}"),
        None => "cost unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn priced(requests: u64, cost: Option<f64>, unpriced: &[&str]) -> Usage {
        Usage {
            requests,
            input_tokens: 10 * requests,
            output_tokens: requests,
            cost_usd: cost,
            unpriced_models: unpriced.iter().map(|m| m.to_string()).collect(),
            ..Usage::default()
        }
    }

    #[test]
    fn a_retried_attempt_adds_up_and_one_unknown_cost_makes_the_total_unknown() {
        let mut first = priced(2, Some(0.5), &[]);
        first.ended_on_api_error = true;
        first.last_api_error = Some("429 rate_limit_error".into());
        let mut second = priced(3, Some(0.25), &[]);
        second.retries = 0;
        first.absorb(&second);
        assert_eq!((first.requests, first.input_tokens), (5, 50));
        assert_eq!(first.dollars(), Some(0.75));
        assert!(!first.ended_on_api_error);
        let idle = Usage::default();
        assert_eq!(idle.dollars(), Some(0.0), "nothing answered costs nothing");
        let spends = [
            AgentSpend {
                usage: first.clone(),
                seconds: Some(2.0),
            },
            AgentSpend {
                usage: idle,
                seconds: None,
            },
        ];
        let t = SpendTotals::of(&spends).unwrap();
        assert_eq!((t.samples, t.requests, t.cost_usd), (2, 5, Some(0.75)));
        let unknown = AgentSpend {
            usage: priced(1, None, &["gpt-z"]),
            seconds: Some(1.0),
        };
        let t = SpendTotals::of(spends.iter().chain([&unknown])).unwrap();
        assert_eq!((t.cost_usd, t.unknown_cost_samples), (None, 1));
        assert_eq!(dollars_text(t.cost_usd), "cost unknown");
        assert!(SpendTotals::of(&[]).is_none());
    }
}

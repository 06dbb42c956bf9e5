//! What a model's answers cost: the tokens each response reports (Anthropic's Messages,
//! OpenAI's Responses and Chat Completions, streamed or whole), read as they stream by and
//! priced by `core::spend`. Pure: bytes in, counts out.

pub use crate::core::spend::{Price, Prices, Tokens, Usage, price_of};

use serde_json::Value;

/// Reads the usage a response reports, from its whole JSON body or from its server-sent
/// events as they stream by (fed in pieces, split anywhere).
#[derive(Debug, Default)]
pub struct UsageReader {
    pending: Vec<u8>,
    whole: Vec<u8>,
    streamed: bool,
    pub tokens: Tokens,
    pub model: String,
    too_long: bool,
    saw_usage: bool,
}

/// A response body over this is not read for usage (a model's answer is far smaller).
const MAX_BODY: usize = 64 << 20;

impl UsageReader {
    pub fn new(event_stream: bool) -> UsageReader {
        UsageReader {
            streamed: event_stream,
            ..UsageReader::default()
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        if !self.streamed {
            if self.whole.len() + bytes.len() <= MAX_BODY {
                self.whole.extend_from_slice(bytes);
            } else {
                self.too_long = true;
            }
            return;
        }
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            if let Some(data) = line.trim_end().strip_prefix("data:")
                && let Ok(event) = serde_json::from_str::<Value>(data.trim())
            {
                self.read_event(&event);
            }
        }
        if self.pending.len() > MAX_BODY {
            self.pending.clear();
        }
    }

    /// The model and tokens once the body has ended (None: it reported no usage).
    pub fn finish(mut self) -> (String, Option<Tokens>) {
        if !self.streamed
            && !self.too_long
            && let Ok(body) = serde_json::from_slice::<Value>(&self.whole)
        {
            self.read_event(&body);
        }
        (self.model, self.saw_usage.then_some(self.tokens))
    }

    /// One event or body: usage at its top, in `message` (Anthropic's message_start) or in
    /// `response` (OpenAI's response.completed). Counts only grow within a response
    /// (Anthropic's message_delta repeats the output so far).
    fn read_event(&mut self, event: &Value) {
        for holder in [event, &event["message"], &event["response"]] {
            if let Some(m) = holder["model"].as_str()
                && self.model.is_empty()
            {
                self.model = m.to_string();
            }
            let u = &holder["usage"];
            if u.is_object() {
                self.saw_usage = true;
                let t = tokens_of(u);
                let n = &mut self.tokens;
                n.input = n.input.max(t.input);
                n.output = n.output.max(t.output);
                n.cache_read = n.cache_read.max(t.cache_read);
                n.cache_write = n.cache_write.max(t.cache_write);
            }
        }
    }
}

/// One usage object in either provider's words.
fn tokens_of(u: &Value) -> Tokens {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    if u.get("prompt_tokens").is_some() || u.get("input_tokens_details").is_some() {
        // OpenAI: input (prompt) tokens include the cached ones.
        let input = n(&u["input_tokens"]) + n(&u["prompt_tokens"]);
        let cached = n(&u["input_tokens_details"]["cached_tokens"])
            + n(&u["prompt_tokens_details"]["cached_tokens"]);
        return Tokens {
            input: input.saturating_sub(cached),
            output: n(&u["output_tokens"]) + n(&u["completion_tokens"]),
            cache_read: cached,
            cache_write: 0,
        };
    }
    Tokens {
        input: n(&u["input_tokens"]),
        output: n(&u["output_tokens"]),
        cache_read: n(&u["cache_read_input_tokens"]),
        cache_write: n(&u["cache_creation_input_tokens"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices() -> Prices {
        let mut p = Prices::new();
        p.insert(
            "claude-x".into(),
            Price {
                input: 3.0,
                output: 15.0,
                cache_read: Some(0.3),
                cache_write: Some(3.75),
            },
        );
        p
    }

    #[test]
    fn an_anthropic_stream_split_anywhere_reads_its_final_counts() {
        let stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x-1\",\"usage\":{\"input_tokens\":100,\"output_tokens\":1,\"cache_read_input_tokens\":10,\"cache_creation_input_tokens\":5}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":20}}\n\n";
        for cut in [1, 7, 50, 151, stream.len() - 1] {
            let mut r = UsageReader::new(true);
            r.feed(&stream.as_bytes()[..cut]);
            r.feed(&stream.as_bytes()[cut..]);
            let (model, t) = r.finish();
            let t = t.unwrap();
            assert_eq!(model, "claude-x-1");
            assert_eq!(
                t,
                Tokens {
                    input: 100,
                    output: 20,
                    cache_read: 10,
                    cache_write: 5
                }
            );
        }
        let mut u = Usage::default();
        u.add(
            "claude-x-20250929",
            &Tokens {
                input: 1_000_000,
                output: 1_000_000,
                cache_read: 1_000_000,
                cache_write: 0,
            },
            &prices(),
        );
        assert!((u.cost_usd.unwrap() - 18.3).abs() < 1e-9, "{u:?}");
    }

    #[test]
    fn openai_counts_cached_input_once_and_unknown_models_have_no_cost() {
        let body = br#"{"model":"gpt-z","usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":400},"output_tokens":50}}"#;
        let mut r = UsageReader::new(false);
        r.feed(body);
        let (model, t) = r.finish();
        let t = t.unwrap();
        assert_eq!((t.input, t.cache_read, t.output), (600, 400, 50));
        let mut u = Usage::default();
        u.add(&model, &t, &prices());
        u.add(
            "claude-x",
            &Tokens {
                input: 1,
                ..Tokens::default()
            },
            &prices(),
        );
        assert_eq!(
            u.cost_usd, None,
            "an unpriced model leaves the cost unknown"
        );
        assert_eq!(u.unpriced_models, vec!["gpt-z".to_string()]);
        let chat = "data: {\"model\":\"m\",\"choices\":[]}\n\ndata: {\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\ndata: [DONE]\n\n";
        let mut r = UsageReader::new(true);
        r.feed(chat.as_bytes());
        let (_, t) = r.finish();
        let t = t.unwrap();
        assert_eq!((t.input, t.cache_read, t.output), (5, 2, 3));
        let mut r = UsageReader::new(true);
        r.feed(b"data: {\"model\":\"m\",\"choices\":[]}\n\ndata: [DONE]\n\n");
        assert_eq!(r.finish().1, None, "no usage reported is not zero");
        let mut p = prices();
        p.insert(
            "gpt-5".into(),
            Price {
                input: 1.0,
                output: 1.0,
                cache_read: None,
                cache_write: None,
            },
        );
        assert!(price_of(&p, "gpt-5-2025-08-07").is_some());
        assert!(price_of(&p, "claude-x-20250929").is_some());
        assert!(price_of(&p, "gpt-5-pro").is_none() && price_of(&p, "gpt-5.2-pro").is_none());
    }
}

#!/usr/bin/env python3
"""A scripted model server for the tests of real agents (Claude Code, Codex, litellm-based
agents): it speaks Anthropic's Messages API and OpenAI's Responses and Chat Completions APIs,
streamed or whole, well enough for their CLIs, and answers from a script instead of a model.

    scripted_model.py --script SCRIPT.json --port-file PORT_FILE [--log LOG.jsonl]

SCRIPT.json: {"steps": ["shell command", ...], "final": "text", "usage": {"input_tokens": N,
"output_tokens": N, "cache_read": N, "cache_write": N}, "errors": [429, ...], "quote_key": false}. A request that
offers tools gets the next step as a call of its shell tool (Claude Code's Bash, Codex's
exec_command, a chat agent's first function), counted from the tool calls already in the
conversation, so every conversation plays the script from its start; once the steps are
done, the final text. A request without tools (a title, a summary) gets "ok". Each status in
"errors" answers one request, in order, before any is answered (a provider's 429 or 529); with "quote_key" their messages quote the
credential the request carried (a careless provider's).
Every response reports "usage". LOG.jsonl gets one line per request: path, model, the
credential headers as received, the tool results the conversation holds, and what was
answered. Binds 127.0.0.1 on a free port,
written to PORT_FILE once it listens."""
import argparse
import http.server
import json
import threading

LOCK = threading.Lock()


def sse(events):
    return "".join("event: %s\ndata: %s\n\n" % (name, json.dumps(data)) for name, data in events).encode()


class Script:
    def __init__(self, path):
        with open(path) as f:
            s = json.load(f)
        self.steps = s.get("steps", [])
        self.final = s.get("final", "done")
        u = s.get("usage", {})
        self.usage = {k: int(u.get(k, 0)) for k in ("input_tokens", "output_tokens", "cache_read", "cache_write")}
        self.errors = list(s.get("errors", []))
        self.quote_key = bool(s.get("quote_key"))

    def next_error(self):
        with LOCK:
            return self.errors.pop(0) if self.errors else None

    def answer(self, done, has_tools):
        """("call", command) or ("text", text)."""
        if not has_tools:
            return ("text", "ok")
        if done < len(self.steps):
            return ("call", self.steps[done])
        return ("text", self.final)


def anthropic(script, body):
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant"
               for c in (m.get("content") if isinstance(m.get("content"), list) else [])
               if c.get("type") == "tool_use")
    kind, value = script.answer(done, bool(body.get("tools")))
    u = script.usage
    usage = {"input_tokens": u["input_tokens"], "output_tokens": 1,
             "cache_read_input_tokens": u["cache_read"], "cache_creation_input_tokens": u["cache_write"]}
    if kind == "call":
        block = {"type": "tool_use", "id": "toolu_%d" % done, "name": "Bash", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps({"command": value, "description": "step %d" % done})}
        whole = dict(block, input={"command": value, "description": "step %d" % done})
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": value}
        whole = {"type": "text", "text": value}
        stop = "end_turn"
    message = {"id": "msg_%d" % done, "type": "message", "role": "assistant", "model": body.get("model"),
               "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    if not body.get("stream"):
        final = dict(message, content=[whole], stop_reason=stop,
                     usage=dict(usage, output_tokens=u["output_tokens"]))
        return "application/json", json.dumps(final).encode(), (kind, value)
    return "text/event-stream", sse([
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": u["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ]), (kind, value)


def openai_usage(u):
    return {"input_tokens": u["input_tokens"] + u["cache_read"],
            "input_tokens_details": {"cached_tokens": u["cache_read"]},
            "output_tokens": u["output_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u["input_tokens"] + u["cache_read"] + u["output_tokens"]}


def responses(script, body):
    items = body.get("input") if isinstance(body.get("input"), list) else []
    done = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call")
    names = [t.get("name") for t in body.get("tools", []) if t.get("type") == "function"]
    kind, value = script.answer(done, bool(names))
    if kind == "call":
        tool = "exec_command" if "exec_command" in names else ("shell" if "shell" in names else names[0])
        args = {"cmd": value} if tool == "exec_command" else {"command": ["bash", "-lc", value]}
        item = {"type": "function_call", "id": "fc_%d" % done, "call_id": "call_%d" % done,
                "name": tool, "arguments": json.dumps(args), "status": "completed"}
    else:
        item = {"type": "message", "id": "msg_%d" % done, "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": value, "annotations": []}]}
    response = {"id": "resp_%d" % done, "object": "response", "model": body.get("model"),
                "status": "completed", "output": [item], "usage": openai_usage(script.usage)}
    if not body.get("stream"):
        return "application/json", json.dumps(response).encode(), (kind, value)
    started = dict(response, status="in_progress", output=[], usage=None)
    return "text/event-stream", sse([
        ("response.created", {"type": "response.created", "response": started}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]), (kind, value)


def chat(script, body):
    done = sum(len(m.get("tool_calls") or []) for m in body.get("messages", []) if m.get("role") == "assistant")
    names = [t["function"]["name"] for t in body.get("tools", []) if t.get("type") == "function"]
    kind, value = script.answer(done, bool(names))
    message = {"role": "assistant", "content": None if kind == "call" else value}
    if kind == "call":
        message["tool_calls"] = [{"id": "call_%d" % done, "type": "function",
                                  "function": {"name": names[0], "arguments": json.dumps({"command": value})}}]
    u = script.usage
    usage = {"prompt_tokens": u["input_tokens"] + u["cache_read"], "completion_tokens": u["output_tokens"],
             "prompt_tokens_details": {"cached_tokens": u["cache_read"]}}
    finish = "tool_calls" if kind == "call" else "stop"
    whole = {"id": "chat_%d" % done, "object": "chat.completion", "model": body.get("model"),
             "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}
    if not body.get("stream"):
        return "application/json", json.dumps(whole).encode(), (kind, value)
    chunk = {"id": whole["id"], "object": "chat.completion.chunk", "model": body.get("model"),
             "choices": [{"index": 0, "delta": message, "finish_reason": finish}]}
    tail = dict(chunk, choices=[], usage=usage)
    data = "data: %s\n\ndata: %s\n\ndata: [DONE]\n\n" % (json.dumps(chunk), json.dumps(tail))
    return "text/event-stream", data.encode(), (kind, value)


ROUTES = {"/v1/messages": anthropic, "/v1/responses": responses, "/v1/chat/completions": chat}


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c.get("text", c.get("content", ""))) if isinstance(c, dict) else str(c)
                         for c in content)
    return ""


def tool_results(body):
    """What the agent's tools gave back so far, in any of the three APIs."""
    out = []
    for m in body.get("messages", []):
        if m.get("role") == "tool":
            out.append(text_of(m.get("content")))
        elif isinstance(m.get("content"), list):
            out += [text_of(c.get("content")) for c in m["content"]
                    if isinstance(c, dict) and c.get("type") == "tool_result"]
    for i in body.get("input") if isinstance(body.get("input"), list) else []:
        if isinstance(i, dict) and i.get("type") == "function_call_output":
            out.append(text_of(i.get("output")))
    return out


def handler(script, log):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, ctype, data):
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def record(self, entry):
            if log:
                with LOCK, open(log, "a") as f:
                    f.write(json.dumps(entry) + "\n")

        def do_GET(self):
            if self.path.split("?")[0] == "/v1/models":
                return self.reply(200, "application/json", json.dumps(
                    {"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode())
            self.reply(404, "application/json", b'{"error": {"message": "not found"}}')

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return self.reply(400, "application/json", b'{"error": {"message": "not JSON"}}')
            path = self.path.split("?")[0]
            entry = {"path": path, "model": body.get("model"), "stream": bool(body.get("stream")),
                     "x-api-key": self.headers.get("x-api-key"),
                     "authorization": self.headers.get("authorization"),
                     "tool_results": tool_results(body),
                     "tools": [t.get("name") or t.get("type") for t in body.get("tools", []) if isinstance(t, dict)]}
            route = ROUTES.get(path)
            if route is None:
                self.record(dict(entry, answered=404))
                return self.reply(404, "application/json", b'{"error": {"message": "not found"}}')
            status = script.next_error()
            if status:
                self.record(dict(entry, answered=status))
                kind = "overloaded_error" if status == 529 else "rate_limit_error"
                message = "scripted %d" % status
                if script.quote_key:  # a careless provider: its error quotes the credential
                    message += " for key %s" % (self.headers.get("x-api-key") or self.headers.get("authorization"))
                return self.reply(status, "application/json", json.dumps(
                    {"type": "error", "error": {"type": kind, "message": message}}).encode())
            ctype, data, said = route(script, body)
            self.record(dict(entry, answered=200, said=list(said)))
            self.reply(200, ctype, data)

    return Handler


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--script", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--log")
    a = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler(Script(a.script), a.log))
    with open(a.port_file + ".partial", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.replace(a.port_file + ".partial", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()

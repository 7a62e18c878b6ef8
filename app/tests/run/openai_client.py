"""Drives `headroom serve` with the official OpenAI Python client (and, for
the flood and the shutdown, the HTTP client it is built on: httpx2 for
openai 3.x).

    python openai_client.py BASE_URL compat
    python openai_client.py BASE_URL flood N TIMEOUT_S
    python openai_client.py BASE_URL streams N      (prints READY when every
                                                     stream has text, then
                                                     waits for their ends)
    python openai_client.py BASE_URL conversation TURNS
    python openai_client.py BASE_URL interleaved TURNS    (two slots)
    python openai_client.py BASE_URL reasoning     (reasoning_content split,
                                                    streamed and not, and off)
    python openai_client.py BASE_URL logprobs      (greedy, chat and legacy,
                                                    streamed and not)
    python openai_client.py BASE_URL tools         (a server with a tool
                                                    template: required, named,
                                                    streamed, single, auto, a
                                                    tool result, refusals)
    python openai_client.py BASE_URL structured    (response_format: the
                                                    client's parse() with a
                                                    pydantic model, json_object,
                                                    a streamed schema, refusals,
                                                    tools refused)
    python openai_client.py BASE_URL embeddings [plain]   (floats, the
                                                    client's own base64 and a
                                                    list; without `plain`,
                                                    also the refusals)

Each mode asserts what it checks and prints one JSON line of findings for
the Rust test to check again; any failed assertion exits non-zero.
"""

import asyncio
import json
import sys
import threading
import time

import openai

try:  # the HTTP client openai 3.x is built on
    import httpx2 as httpx
except ImportError:  # openai 1.x and 2.x
    import httpx

base = sys.argv[1]
mode = sys.argv[2]
client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=120)
ASK = [{"role": "user", "content": "What is the capital of France?"}]


def chat(**kw):
    args = dict(model="anything", messages=ASK, temperature=0, max_tokens=24)
    args.update(kw)
    return client.chat.completions.create(**args)


def streamed(**kw):
    text, finish, chunks = "", None, 0
    for chunk in chat(stream=True, **kw):
        chunks += 1
        if chunk.choices:
            delta = chunk.choices[0].delta
            text += delta.content or ""
            if chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
    return text, finish, chunks


def compat():
    out = {}
    models = client.models.list()
    out["models"] = [m.id for m in models.data]
    assert len(out["models"]) == 1, out
    # The context a request can use, under the names clients probe for.
    extra = models.data[0].model_dump()
    out["context_length"] = extra.get("context_length")
    out["max_model_len"] = extra.get("max_model_len")
    out["meta"] = extra.get("meta")
    assert out["context_length"] == out["max_model_len"] == out["meta"]["n_ctx"], out

    # Fields this server does not know are ignored (llama-server's and
    # vLLM's own, a made-up one), not refused.
    known = chat()
    unknown = chat(
        extra_body={"cache_prompt": True, "top_k": 1, "frobnicate": {"x": [1, 2]}},
        user="someone",
        presence_penalty=0.0,
    )
    assert unknown.choices[0].message.content == known.choices[0].message.content, unknown
    out["unknown_fields"] = "ignored"

    # Refusals carry OpenAI's error object, which the client hands over as .body.
    bodies = []
    for bad in (dict(max_tokens=0), dict(messages=[{"role": "wizard", "content": "x"}])):
        try:
            chat(**bad)
            raise AssertionError(f"{bad} accepted")
        except openai.BadRequestError as e:
            assert isinstance(e.body, dict), e.body
            assert set(e.body) == {"message", "type", "param", "code"}, e.body
            assert e.body["type"] == "invalid_request_error" and e.body["message"], e.body
            bodies.append(e.body)
    out["error_bodies"] = bodies

    first = chat()
    again = chat()
    text = first.choices[0].message.content
    out["text"] = text
    assert text, "an answer"
    assert again.choices[0].message.content == text, "temperature 0 twice, same text"
    assert first.choices[0].finish_reason in ("stop", "length")
    assert first.usage.completion_tokens > 0
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens

    s_text, s_finish, chunks = streamed()
    assert s_text == text, f"streamed {s_text!r} == {text!r}"
    assert s_finish == first.choices[0].finish_reason
    out["stream_chunks"] = chunks

    short = chat(max_tokens=3)
    assert short.choices[0].finish_reason == "length", short
    assert short.usage.completion_tokens == 3, short.usage

    # A stop string taken from the answer itself: the answer ends before it.
    words = [w for w in text.split() if len(w) > 2]
    assert words, text
    stop = words[min(1, len(words) - 1)]
    stopped = chat(stop=[stop])
    st = stopped.choices[0].message.content
    assert stop not in st, f"{stop!r} not in {st!r}"
    assert text.startswith(st), f"{text!r} starts with {st!r}"
    assert stopped.choices[0].finish_reason == "stop"
    out["stop"] = stop

    # Streaming with usage.
    usage = None
    for chunk in chat(stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
    assert usage and usage.completion_tokens > 0, usage

    try:
        chat(temperature=5)
        raise AssertionError("temperature 5 accepted")
    except openai.BadRequestError as e:
        out["bad_request"] = str(e)[:200]

    # Eight concurrent streams, each to the end.
    results = [None] * 8

    def one(i):
        results[i] = streamed(
            messages=[{"role": "user", "content": f"Say something about the number {i}."}],
            max_tokens=16,
        )

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(r is not None and r[1] in ("stop", "length") for r in results), results
    out["concurrent"] = len(results)

    legacy = client.completions.create(
        model="anything", prompt="The capital of France is", max_tokens=8, temperature=0
    )
    assert legacy.choices[0].text, legacy
    assert legacy.object == "text_completion"
    out["legacy"] = legacy.choices[0].text
    print(json.dumps(out))


async def flood(n, timeout):
    """n requests at once, each on its own connection, in plain asyncio (a
    full HTTP client per request would make the flood test the client)."""
    host, port = base.split("//")[1].split("/")[0].split(":")
    body = json.dumps(
        {"model": "m", "prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    statuses, retry_after, errors, slowest = {}, 0, [], 0.0

    async def one():
        nonlocal retry_after, slowest
        t0 = time.monotonic()
        try:
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(head + body)
            await writer.drain()
            raw = await reader.read()  # to EOF: Connection: close
            writer.close()
            status_line, _, rest = raw.partition(b"\r\n")
            status = int(status_line.split()[1])
            headers, _, payload = rest.partition(b"\r\n\r\n")
            statuses[status] = statuses.get(status, 0) + 1
            if status == 503:
                if b"retry-after:" in headers.lower():
                    retry_after += 1
                assert b'"message"' in payload, payload
        except Exception as e:  # a reset or a refusal is a finding, not a crash
            errors.append(f"{type(e).__name__}: {e}"[:120])
        slowest = max(slowest, time.monotonic() - t0)

    async def bounded():
        try:
            await asyncio.wait_for(one(), timeout)
        except asyncio.TimeoutError:
            errors.append(f"no answer within {timeout} s")

    t0 = time.monotonic()
    await asyncio.gather(*(bounded() for _ in range(n)))
    took = time.monotonic() - t0
    # A normal request right after, with the official client.
    after = client.completions.create(model="m", prompt="Hello", max_tokens=4, temperature=0)
    out = {
        "statuses": {str(k): v for k, v in statuses.items()},
        "retry_after": retry_after,
        "errors": errors[:20],
        "n_errors": len(errors),
        "seconds": round(took, 2),
        "slowest": round(slowest, 2),
        "after": after.choices[0].text,
    }
    print(json.dumps(out))
    assert not errors, out
    assert set(statuses) <= {200, 503}, out
    assert retry_after == statuses.get(503, 0), out


def streams(n):
    """n long streams; READY once each has text; then each must end with a
    finish_reason and [DONE] (the server is stopped by the test)."""
    got_text = [threading.Event() for _ in range(n)]
    ends = [None] * n

    def one(i):
        finish, done = None, False
        body = {
            "model": "m",
            "prompt": f"Chapter {i + 1}. It was a long story:",
            "max_tokens": 100000,
            "temperature": 0.8,
            "seed": i,
            "stream": True,
        }
        try:
            with httpx.stream("POST", base + "/completions", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    data = line[len("data: "):]
                    if data == "[DONE]":
                        done = True
                        continue
                    chunk = json.loads(data)
                    c = chunk["choices"][0]
                    if c["text"]:
                        got_text[i].set()
                    if c["finish_reason"]:
                        finish = c["finish_reason"]
        except Exception as e:
            finish = f"error: {type(e).__name__}"
        ends[i] = {"finish": finish, "done": done}
        got_text[i].set()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for e in got_text:
        e.wait(60)
    print("READY", flush=True)
    for t in threads:
        t.join(60)
    print(json.dumps({"ends": ends}))
    assert all(e and e["done"] and e["finish"] in ("stop", "length") for e in ends), ends


def conversation(turns):
    """A chat client's conversation: each turn resends the whole history.
    Prints, per turn, the prompt tokens, those the server took from its
    cache, and the answer, for the test to hold against llama-server's."""
    hist = [{"role": "system", "content": "You are a helpful assistant who answers briefly."}]
    asks = [
        "Name three rivers in Europe.",
        "Which of them is the longest?",
        "Which countries does it flow through?",
        "Write one sentence about a boat on that river.",
        "Now write a second sentence that continues the story.",
        "What is the capital of France?",
    ]
    found = []
    for k in range(turns):
        hist.append({"role": "user", "content": asks[k % len(asks)]})
        r = chat(messages=hist, max_tokens=32)
        details = r.usage.prompt_tokens_details
        answer = r.choices[0].message.content
        assert answer, r
        found.append(
            {
                "prompt": r.usage.prompt_tokens,
                "cached": details.cached_tokens if details else None,
                "answer": answer,
            }
        )
        hist.append({"role": "assistant", "content": answer})
    print(json.dumps({"turns": found}))


def interleaved(turns):
    """Two conversations taking turns on two slots: each finds its own
    history in the slot it left, whatever slot the other used."""
    hists = [
        [{"role": "user", "content": "Tell me about cats."}],
        [{"role": "user", "content": "Tell me about the sea."}],
    ]
    found, prev = [], [0, 0]
    for k in range(turns):
        for c in (0, 1):
            r = chat(messages=hists[c], max_tokens=16)
            cached = r.usage.prompt_tokens_details.cached_tokens
            if k > 0:
                assert cached >= prev[c], (k, c, cached, prev[c])
            found.append({"conversation": c, "prompt": r.usage.prompt_tokens, "cached": cached})
            prev[c] = r.usage.prompt_tokens
            hists[c].append({"role": "assistant", "content": r.choices[0].message.content})
            hists[c].append({"role": "user", "content": "And then?"})
    print(json.dumps({"turns": found}))


def logprobs():
    """Greedy log-probabilities, chat and legacy, streamed and not."""
    # A system message: without one, SmolLM2's template adds its own, which
    # llama-server's rendering and headroom's need not agree on.
    ask = [{"role": "system", "content": "You are a helpful assistant who answers briefly."}] + ASK
    kw = dict(messages=ask, max_tokens=16, logprobs=True, top_logprobs=5)
    whole = chat(**kw)
    content = whole.choices[0].logprobs.content
    assert content, whole
    assert "".join(t.token for t in content) == whole.choices[0].message.content, whole
    for t in content:
        tops = [a.logprob for a in t.top_logprobs]
        assert len(tops) == 5, t
        assert tops == sorted(tops, reverse=True), t
        # Greedy: the chosen token is the most likely one.
        assert t.logprob >= tops[0] - 1e-6, t
        assert t.logprob <= 0 and list(t.token.encode()) == t.bytes, t
    parts = []
    for chunk in chat(stream=True, **kw):
        if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
            lps = chunk.choices[0].logprobs.content
            # A chunk's delta carries its own tokens.
            assert "".join(t.token for t in lps) == (chunk.choices[0].delta.content or ""), chunk
            parts += lps
    same = [(t.token, round(t.logprob, 4)) for t in parts] == [
        (t.token, round(t.logprob, 4)) for t in content
    ]
    assert same, (parts, content)
    # Not asked: none.
    assert chat(max_tokens=4).choices[0].logprobs is None
    legacy = client.completions.create(
        model="anything", prompt="The capital of France is", temperature=0, max_tokens=8, logprobs=3
    )
    lp = legacy.choices[0].logprobs
    if lp.tokens is None:
        # llama-server answers legacy completions in chat's shape
        # (`logprobs.content`), not OpenAI's legacy lists.
        shape = "chat"
        pairs = [[t["token"], t["logprob"]] for t in lp.model_extra["content"]]
    else:
        shape = "legacy"
        assert "".join(lp.tokens) == legacy.choices[0].text, legacy
        n = len(lp.tokens)
        assert len(lp.token_logprobs) == n == len(lp.top_logprobs) == len(lp.text_offset), lp
        offsets = [sum(len(t) for t in lp.tokens[:i]) for i in range(n)]
        assert lp.text_offset == offsets, lp
        for d, l in zip(lp.top_logprobs, lp.token_logprobs):
            assert len(d) == 3 and max(d.values()) <= l + 1e-6, lp
        pairs = [[t, l] for t, l in zip(lp.tokens, lp.token_logprobs)]
    print(
        json.dumps(
            {
                "prompt": whole.usage.prompt_tokens,
                "chat": [[t.token, t.logprob] for t in content],
                "streamed": len(parts),
                "legacy": pairs,
                "legacy_shape": shape,
            }
        )
    )


def reasoning():
    """The answer's reasoning_content and content, streamed and not, and
    with reasoning_format "none"."""
    out = {}
    for name, extra in (("auto", {}), ("none", {"reasoning_format": "none"})):
        m = chat(max_tokens=12, extra_body=extra).choices[0].message
        out[name] = [getattr(m, "reasoning_content", None), m.content]
        r, c = None, ""
        for chunk in chat(max_tokens=12, extra_body=extra, stream=True):
            if chunk.choices:
                d = chunk.choices[0].delta
                piece = getattr(d, "reasoning_content", None)
                if piece:
                    r = (r or "") + piece
                c += d.content or ""
        out[name + "_streamed"] = [r, c]
    print(json.dumps(out))


def refused(words, **kw):
    """A 400 with OpenAI's error body whose message names `words`."""
    try:
        chat(**kw)
    except openai.BadRequestError as e:
        assert e.body["type"] == "invalid_request_error", e.body
        assert words in e.body["message"], (words, e.body)
        return e.body["message"]
    raise AssertionError(f"accepted: {kw}")


def structured():
    """response_format enforced, or refused by name; never ignored."""
    from pydantic import BaseModel, Field

    class City(BaseModel):
        name: str = Field(max_length=24)
        country: str = Field(max_length=24)
        population: int = Field(ge=0, le=100_000_000)

    ask = [{"role": "user", "content": "Name the capital of France, its country and its population."}]
    out = {"plain": chat(messages=ask, max_tokens=40).choices[0].message.content}

    # The official client's structured-output call: a pydantic model sent as
    # a strict json_schema, the answer parsed back into the model.
    parse = getattr(client.chat.completions, "parse", None) or client.beta.chat.completions.parse
    done = parse(model="anything", messages=ask, response_format=City, temperature=0, max_tokens=200)
    choice = done.choices[0]
    assert choice.finish_reason == "stop", choice
    assert isinstance(choice.message.parsed, City), choice.message
    out["schema"] = choice.message.parsed.model_dump()

    # json_object: any JSON object (asked for a short one: on a question
    # with no shape, the 135M model keeps adding keys, grammatical to the
    # last token, until max_tokens).
    short = [{"role": "user", "content": "Reply with a JSON object with one key, name, set to your name."}]
    obj = chat(messages=short, max_tokens=200, response_format={"type": "json_object"}).choices[0]
    assert obj.finish_reason == "stop", obj
    text = obj.message.content
    out["json_object"] = json.loads(text)
    assert isinstance(out["json_object"], dict), text

    # A pattern, streamed.
    code = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
        "required": ["code"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "code", "schema": code, "strict": True}}
    streamed_text = ""
    for chunk in chat(messages=ask, max_tokens=60, stream=True, response_format=fmt):
        if chunk.choices:
            streamed_text += chunk.choices[0].delta.content or ""
    out["streamed"] = json.loads(streamed_text)
    assert list(out["streamed"]) == ["code"], streamed_text
    assert len(out["streamed"]["code"]) == 3 and out["streamed"]["code"].isupper(), streamed_text

    # What llama.cpp's converter would ignore is refused, by name.
    out["refusals"] = [
        refused(word, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
        for schema, word in (
            ({"type": "object", "properties": {"e": {"type": "string", "format": "email"}}}, "email"),
            ({"type": "number", "minimum": 1}, "number"),
            ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf"),
            ({"type": "string", "pattern": "^(?=a)a$"}, "pattern"),
            ({"type": "integer", "multipleOf": 2}, "multipleOf"),
        )
    ]
    out["refusals"].append(refused("response_format.type", response_format={"type": "yaml"}))

    # This model's own template has no tools: refused, never silently
    # dropped; with tool_choice "none" the request is a plain chat.
    out["tools"] = refused("--chat-template hermes", tools=TOOLS[:1])
    out["tools_none"] = chat(tools=TOOLS[:1], tool_choice="none", max_tokens=8).choices[0].finish_reason
    print(json.dumps(out))


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 32},
                    "unit": {"enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city", "unit"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The local time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"zone": {"type": "string", "maxLength": 32}},
                "required": ["zone"],
                "additionalProperties": False,
            },
        },
    },
]
WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


def check_call(call, name=None):
    """A tool call in OpenAI's shape whose arguments are valid JSON for its
    function's schema; returns (name, arguments)."""
    assert call.id and call.type == "function", call
    args = json.loads(call.function.arguments)
    if name:
        assert call.function.name == name, call
    if call.function.name == "get_weather":
        assert set(args) == {"city", "unit"}, args
        assert isinstance(args["city"], str) and len(args["city"]) <= 32, args
        assert args["unit"] in ("celsius", "fahrenheit"), args
    else:
        assert call.function.name == "get_time", call
        assert set(args) == {"zone"} and isinstance(args["zone"], str), args
    return [call.function.name, args]


def tools():
    out = {}
    # required: the model must call one of the tools.
    r = chat(messages=WEATHER, tools=TOOLS, tool_choice="required", max_tokens=120)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert c.message.tool_calls, c.message
    out["required"] = [check_call(t) for t in c.message.tool_calls]
    first = c.message.tool_calls[0]

    # A function by name, and parallel_tool_calls false: exactly that one call.
    r = chat(
        messages=WEATHER,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        parallel_tool_calls=False,
        max_tokens=120,
    )
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and len(calls) == 1, r.choices[0]
    out["named"] = check_call(calls[0], "get_time")

    # Streamed: every tool-call delta has its index, the first of a call its id.
    seen, finish, content = {}, None, ""
    for chunk in chat(messages=WEATHER, tools=TOOLS, tool_choice="required", max_tokens=120, stream=True):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        for t in d.tool_calls or []:
            assert t.index is not None, t
            if t.index not in seen:
                assert t.id, t
                seen[t.index] = {"id": t.id, "name": t.function.name, "arguments": ""}
            seen[t.index]["arguments"] += t.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls" and seen, (finish, seen)
    out["streamed"] = [[s["name"], json.loads(s["arguments"])] for s in seen.values()]
    assert out["streamed"] == out["required"], (out["streamed"], out["required"])

    # auto: the model may answer or call; either way, a valid answer.
    r = chat(messages=WEATHER, tools=TOOLS, max_tokens=120)
    c = r.choices[0]
    if c.message.tool_calls:
        assert c.finish_reason == "tool_calls", c
        out["auto"] = [check_call(t) for t in c.message.tool_calls]
    else:
        assert c.finish_reason in ("stop", "length") and c.message.content, c
        out["auto"] = c.message.content

    # The tool's result goes back, and the model answers from it.
    history = WEATHER + [
        {"role": "assistant", "content": None, "tool_calls": [first.model_dump()]},
        {"role": "tool", "tool_call_id": first.id, "content": '{"temperature": 21, "sky": "clear"}'},
    ]
    r = chat(messages=history, tools=TOOLS, tool_choice="none", max_tokens=24)
    assert r.choices[0].message.content, r.choices[0]
    out["after_result"] = r.choices[0].message.content

    # What the grammar could not enforce, and a name that is not a tool.
    bad = json.loads(json.dumps(TOOLS[:1]))
    bad[0]["function"]["parameters"]["properties"]["city"]["format"] = "email"
    out["refusals"] = [
        refused("email", tools=bad),
        refused("not among the tools", tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}}),
        refused("tools[0].function.name", tools=[{"type": "function", "function": {"name": "has space"}}]),
    ]
    print(json.dumps(out))


TEXTS = [
    "The capital of France is Paris.",
    "A cat sat on the mat and looked at the rain.",
    "def add(a, b):\n    return a + b",
]


def embeddings(plain):
    out = {}
    # The client's default: it asks for base64 and decodes it itself.
    default = client.embeddings.create(model="m", input=TEXTS[0])
    floats = client.embeddings.create(model="m", input=TEXTS[0], encoding_format="float")
    a, b = default.data[0].embedding, floats.data[0].embedding
    assert len(a) == len(b) > 0, (len(a), len(b))
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-6, "base64 and float differ"
    raw = client.embeddings.create(model="m", input=TEXTS[0], encoding_format="base64")
    assert isinstance(raw.data[0].embedding, str), type(raw.data[0].embedding)
    many = client.embeddings.create(model="m", input=TEXTS, encoding_format="float")
    assert [d.index for d in many.data] == list(range(len(TEXTS))), many.data
    out["dims"] = len(b)
    out["vectors"] = [d.embedding for d in many.data]
    out["norms"] = [sum(x * x for x in v) ** 0.5 for v in out["vectors"]]
    out["usage"] = many.usage.prompt_tokens
    if not plain:
        out["refusals"] = [
            refused_embedding("dimensions", dimensions=3),
            refused_embedding("empty", input=""),
            refused_embedding("encoding_format", encoding_format="hex"),
        ]
    print(json.dumps(out))


def refused_embedding(words, **kw):
    """A 400 in OpenAI's shape from /v1/embeddings whose message names `words`."""
    kw.setdefault("input", TEXTS[0])
    try:
        client.embeddings.create(model="m", **kw)
    except openai.BadRequestError as e:
        assert e.body["type"] == "invalid_request_error", e.body
        assert words in e.body["message"], (words, e.body)
        return e.body["message"]
    raise AssertionError(f"accepted: {kw}")


if mode == "compat":
    compat()
elif mode == "flood":
    asyncio.run(flood(int(sys.argv[3]), float(sys.argv[4])))
elif mode == "conversation":
    conversation(int(sys.argv[3]))
elif mode == "interleaved":
    interleaved(int(sys.argv[3]))
elif mode == "reasoning":
    reasoning()
elif mode == "logprobs":
    logprobs()
elif mode == "structured":
    structured()
elif mode == "tools":
    tools()
elif mode == "embeddings":
    embeddings(len(sys.argv) > 3 and sys.argv[3] == "plain")
elif mode == "streams":
    streams(int(sys.argv[3]))
else:
    sys.exit(f"unknown mode {mode}")

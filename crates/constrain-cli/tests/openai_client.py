"""Drives `constrain serve` with the official OpenAI Python client (run by tests/serve.rs).

Usage: python3 openai_client.py BASE_URL   (e.g. http://127.0.0.1:PORT/v1)
Exits non-zero with a message on any failure, including a missing `openai` package.
"""
import json
import sys
from concurrent.futures import ThreadPoolExecutor

try:
    import openai
    from openai import OpenAI
except ImportError as e:  # fail loudly, never skip
    sys.exit(f"the `openai` package is missing ({e}); run scripts/install-deps.sh")

BASE = sys.argv[1]
client = OpenAI(base_url=BASE, api_key="not-needed", max_retries=0, timeout=120)

SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 30},
            "year": {"type": "integer", "minimum": 1900, "maximum": 2030},
            "genres": {"type": "array", "items": {"enum": ["drama", "comedy", "horror"]}, "maxItems": 2},
        },
        "required": ["title", "year", "genres"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "score": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["ok", "score"],
        "additionalProperties": False,
    },
]


def check(schema, doc):
    """A small validator for the keywords used above."""
    if schema.get("type") == "object":
        assert isinstance(doc, dict), doc
        for key in schema.get("required", []):
            assert key in doc, (key, doc)
        if schema.get("additionalProperties") is False:
            assert set(doc) <= set(schema["properties"]), doc
        for key, sub in schema["properties"].items():
            if key in doc:
                check(sub, doc[key])
    elif schema.get("type") == "array":
        assert isinstance(doc, list), doc
        assert len(doc) <= schema.get("maxItems", 10**9), doc
        for item in doc:
            check(schema["items"], item)
    elif "enum" in schema:
        assert doc in schema["enum"], doc
    elif schema.get("type") == "string":
        assert isinstance(doc, str) and len(doc) <= schema.get("maxLength", 10**9), doc
    elif schema.get("type") == "integer":
        assert isinstance(doc, int) and not isinstance(doc, bool), doc
        assert schema.get("minimum", -(10**18)) <= doc <= schema.get("maximum", 10**18), doc
    elif schema.get("type") == "number":
        assert isinstance(doc, (int, float)) and not isinstance(doc, bool), doc
        assert schema.get("minimum", -(10**18)) <= doc <= schema.get("maximum", 10**18), doc
    elif schema.get("type") == "boolean":
        assert isinstance(doc, bool), doc


def ask(i, stream=False):
    schema = SCHEMAS[i % len(SCHEMAS)]
    kwargs = dict(
        model="default",
        messages=[{"role": "user", "content": "Describe a film as JSON." if i % 2 == 0 else "Rate this: good."}],
        response_format={"type": "json_schema", "json_schema": {"name": f"s{i % 2}", "schema": schema, "strict": True}},
        max_tokens=48,
        temperature=0.8,
        seed=100 + i,
    )
    if stream:
        text = ""
        for chunk in client.chat.completions.create(stream=True, **kwargs):
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
        return schema, text
    r = client.chat.completions.create(**kwargs)
    assert r.choices[0].finish_reason in ("stop", "length"), r
    assert r.usage.completion_tokens > 0, r
    return schema, r.choices[0].message.content


models = client.models.list()
assert len(models.data) == 1, models

# 8 at a time; every document validates.
with ThreadPoolExecutor(max_workers=8) as pool:
    results = list(pool.map(ask, range(8)))
for schema, text in results:
    check(schema, json.loads(text))

# Streaming returns the same text as non-streaming for the same seed.
_, streamed = ask(3, stream=True)
assert streamed == results[3][1], (streamed, results[3][1])

# A bad schema is a 400 (BadRequestError), and the server keeps serving.
try:
    client.chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "x"}],
        response_format={"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "nope"}}},
    )
    sys.exit("a bad schema was accepted")
except openai.BadRequestError as e:
    assert e.status_code == 400, e

# Plain completions.
c = client.completions.create(model="default", prompt="The sky is", max_tokens=5, seed=1)
assert c.choices[0].text is not None and c.usage.completion_tokens <= 5, c

# Tool calls: held-out schemas, `required` and a named function; every `arguments` string
# parses and validates; `auto` gives text or a valid call; streamed deltas reassemble.
TOOLS = [
    {"type": "function", "function": {
        "name": "convert_currency", "description": "Convert an amount between currencies",
        "parameters": {"type": "object", "properties": {
            "amount": {"type": "number", "minimum": 0, "maximum": 1000000},
            "from": {"enum": ["EUR", "USD", "JPY"]}, "to": {"enum": ["EUR", "USD", "JPY"]}},
            "required": ["amount", "from", "to"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "set_alarm", "description": "Set an alarm",
        "parameters": {"type": "object", "properties": {
            "hour": {"type": "integer", "minimum": 0, "maximum": 23},
            "minute": {"type": "integer", "minimum": 0, "maximum": 59},
            "label": {"type": "string", "maxLength": 20}},
            "required": ["hour", "minute"], "additionalProperties": False}}},
]
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def check_call(name, arguments):
    assert name in PARAMS, name
    assert isinstance(arguments, str), arguments
    args = json.loads(arguments)
    schema = PARAMS[name]
    assert set(args) <= set(schema["properties"]) and all(k in args for k in schema["required"]), args
    for key, value in args.items():
        sub = schema["properties"][key]
        if "enum" in sub:
            assert value in sub["enum"], (key, value)
        else:
            check(sub, value)


def tool_request(i, choice, stream=False):
    kwargs = dict(
        model="default",
        messages=[{"role": "user", "content": ["Convert 20 euros to dollars.", "Wake me at 7:15."][i % 2]}],
        tools=TOOLS, tool_choice=choice, max_tokens=64, temperature=0.7, seed=200 + i,
    )
    if not stream:
        return client.chat.completions.create(**kwargs)
    calls = {}
    finish = None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        for d in chunk.choices[0].delta.tool_calls or []:
            c = calls.setdefault(d.index, {"name": "", "arguments": ""})
            if d.function.name:
                c["name"] += d.function.name
            if d.function.arguments:
                c["arguments"] += d.function.arguments
        finish = chunk.choices[0].finish_reason or finish
    return finish, [calls[k] for k in sorted(calls)]


named = {"type": "function", "function": {"name": "set_alarm"}}


def required_and_named(case):
    i, choice = case
    r = tool_request(i, choice)
    assert r.choices[0].finish_reason == "tool_calls", r
    calls = r.choices[0].message.tool_calls
    assert calls, r
    for c in calls:
        assert c.type == "function" and c.id, c
        check_call(c.function.name, c.function.arguments)
        if choice is named:
            assert c.function.name == "set_alarm", c
    finish, streamed = tool_request(i, choice, stream=True)
    assert finish == "tool_calls", finish
    assert streamed, streamed
    for c in streamed:
        check_call(c["name"], c["arguments"])


# Four at a time: the server decodes them in one batch.
with ThreadPoolExecutor(max_workers=4) as pool:
    list(pool.map(required_and_named, [(i, c) for i in range(2) for c in ("required", named)]))
for i in range(2):
    r = tool_request(i, "auto")
    m = r.choices[0].message
    if m.tool_calls:
        for c in m.tool_calls:
            check_call(c.function.name, c.function.arguments)
    else:
        assert isinstance(m.content, str), r

print("openai client: all checks passed")

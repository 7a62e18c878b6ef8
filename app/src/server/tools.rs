//! Tool calls in the syntaxes the server parses: Hermes (Qwen2.5, Qwen3,
//! Hermes 2/3 and the `hermes` template asset), Llama 3.x's JSON (Llama
//! 3.1–3.3's own templates and the `llama3` asset) and gpt-oss's Harmony
//! (`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`
//! and the arguments): what the model may write, as a grammar, and what it
//! wrote, as OpenAI's `tool_calls`.
//!
//! llama.cpp's own chat layer (`common_chat_templates_apply`) would do this
//! for every family, but it renders with llama.cpp's Jinja, which has no
//! limit on a template's work: a hostile template in a GGUF could hang or
//! exhaust the server. Templates here are rendered by the one bounded
//! engine (`runner::template`) `run`, `chat` and `serve` share, and this
//! module handles the syntax the rendered template asks for.

use serde_json::{Value, json};

use crate::runner::reasoning::{HARMONY_CHANNEL, HARMONY_MESSAGE, HARMONY_START, HARMONY_TO};
use crate::runner::template::{HERMES_CLOSE, HERMES_OPEN, ToolSyntax};
use crate::runner::text::held_back;

use super::openai::Schema;

/// The grammar for tool calls to `callable` (name, parameters) in
/// `syntax`, each a call to one of the functions with arguments valid for
/// its schema:
/// - Hermes: one `<tool_call>{"name": …, "arguments": …}</tool_call>`
///   block, or with `parallel` one or more;
/// - Llama 3.x: one `{"name": …, "parameters": …}` object, the whole
///   answer (its templates show the model one call per turn; `parallel`
///   cannot ask for more).
///
/// The call's grammar is llama.cpp's converter's, from a schema written
/// with `name` first (the order the templates show the model).
///
/// # Errors
/// The converter refused the schema.
pub fn grammar(
    syntax: ToolSyntax,
    callable: &[(String, Schema)],
    parallel: bool,
) -> Result<String, String> {
    let arguments = match syntax {
        ToolSyntax::Hermes => "arguments",
        ToolSyntax::Llama3Json => "parameters",
        ToolSyntax::Harmony => return harmony_grammar(callable),
    };
    let one = |(name, params): &(String, Schema)| {
        format!(
            r#"{{"type":"object","properties":{{"name":{{"const":{}}},"{arguments}":{}}},"required":["name","{arguments}"],"additionalProperties":false}}"#,
            json!(name),
            params.text
        )
    };
    let schema = match callable {
        [only] => one(only),
        many => format!(
            r#"{{"anyOf":[{}]}}"#,
            many.iter().map(one).collect::<Vec<_>>().join(",")
        ),
    };
    let call = crate::llama::grammar::schema_grammar(&schema)?;
    // The converter names its start rule `root`; it becomes one call.
    let call = call
        .lines()
        .map(|l| match l.strip_prefix("root ::=") {
            Some(rest) => format!("tool-call ::={rest}"),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let root = match syntax {
        ToolSyntax::Hermes => {
            let block = format!(r#""{HERMES_OPEN}" "\n"? tool-call "\n"? "{HERMES_CLOSE}""#);
            if parallel {
                format!(r#"root ::= {block} ( "\n"? {block} )*"#)
            } else {
                format!("root ::= {block}")
            }
        }
        ToolSyntax::Llama3Json | ToolSyntax::Harmony => "root ::= tool-call".to_string(),
    };
    Ok(format!("{root}\n{call}\n"))
}

/// A Harmony call's header as gpt-oss writes it after its analysis; the
/// function's name follows.
const HARMONY_CALL: &str = "<|channel|>commentary to=functions.";
/// The same with the recipient first, right after the prompt's
/// `<|start|>assistant`; the name follows, then the channel.
const HARMONY_CALL_RECIPIENT: &str = " to=functions.";

/// Harmony's grammar: one call, its header in either order gpt-oss writes
/// (`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`,
/// or ` to=functions.NAME<|channel|>commentary json<|message|>` after the
/// `<|start|>assistant` the prompt ends with), then arguments valid for that
/// function's schema. Each function's arguments grammar is the converter's,
/// its rules renamed apart so that a name goes only with its own schema.
fn harmony_grammar(callable: &[(String, Schema)]) -> Result<String, String> {
    // A GBNF string literal (JSON's escapes are GBNF's).
    let literal = |s: &str| json!(s).to_string();
    let mut alternatives = Vec::new();
    let mut rules = String::new();
    for (i, (name, params)) in callable.iter().enumerate() {
        let converted = crate::llama::grammar::schema_grammar(&params.text)?;
        rules.push_str(&prefix_rules(&converted, &format!("f{i}-")));
        rules.push('\n');
        let name = literal(name);
        for (head, tail) in [
            (HARMONY_CALL, " <|constrain|>json<|message|>"),
            (
                HARMONY_CALL_RECIPIENT,
                "<|channel|>commentary json<|message|>",
            ),
        ] {
            alternatives.push(format!(
                "{} {name} {} f{i}-root",
                literal(head),
                literal(tail)
            ));
        }
    }
    Ok(format!("root ::= {}\n{rules}", alternatives.join(" | ")))
}

/// `grammar` (GBNF) with every rule name, where defined and where used,
/// given `prefix`: names outside string literals, character classes and
/// comments.
fn prefix_rules(grammar: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(grammar.len() * 2);
    let mut chars = grammar.chars().peekable();
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    while let Some(c) = chars.next() {
        match c {
            '"' | '[' => {
                let close = if c == '"' { '"' } else { ']' };
                out.push(c);
                while let Some(d) = chars.next() {
                    out.push(d);
                    if d == '\\' {
                        if let Some(e) = chars.next() {
                            out.push(e);
                        }
                    } else if d == close {
                        break;
                    }
                }
            }
            '#' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            // A repetition count (`{1,2}`): numbers, not names (a rule may
            // be named `1`, after a property).
            '{' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '}' {
                        break;
                    }
                }
            }
            c if is_name(c) => {
                let mut name = String::from(c);
                while let Some(&d) = chars.peek().filter(|d| is_name(**d)) {
                    name.push(d);
                    chars.next();
                }
                out.push_str(prefix);
                out.push_str(&name);
            }
            c => out.push(c),
        }
    }
    out
}

/// Where a Hermes or Harmony call starts in the text, for a stream to hold
/// back from. (A Llama 3.x call is the whole answer: see [`ToolSplit`].)
fn openers(syntax: ToolSyntax) -> &'static [&'static str] {
    match syntax {
        ToolSyntax::Hermes => &[HERMES_OPEN],
        ToolSyntax::Llama3Json => &[],
        // The headers as the answer holds them, `<|start|>assistant` and
        // all (it is not content).
        ToolSyntax::Harmony => &[
            "<|start|>assistant<|channel|>commentary to=functions.",
            "<|start|>assistant to=functions.",
            HARMONY_CALL,
            HARMONY_CALL_RECIPIENT,
        ],
    }
}

/// Llama 3.x writes it before a call to a built-in tool.
const LLAMA3_PYTHON_TAG: &str = "<|python_tag|>";

/// The trigger patterns of a lazy grammar (`auto`) in `syntax`, for
/// llama.cpp's lazy grammar (regular expressions; the grammar takes over at
/// the first group, where it starts): anywhere for Hermes' tag and Harmony's
/// headers; for Llama 3.x only an answer that opens with the call, as
/// llama.cpp's own handler triggers (a `{"name"` inside prose or code
/// must not force a call).
#[must_use]
pub fn triggers(syntax: ToolSyntax) -> Vec<String> {
    let anywhere = |words: &[&str]| {
        let words: Vec<String> = words.iter().map(|w| regex_escape(w)).collect();
        format!(r"[\s\S]*?({})[\s\S]*", words.join("|"))
    };
    match syntax {
        ToolSyntax::Hermes => vec![anywhere(&[HERMES_OPEN])],
        ToolSyntax::Harmony => vec![anywhere(&[HARMONY_CALL, HARMONY_CALL_RECIPIENT])],
        // The grammar's object accepts one space around its first key
        // (the converter's `space` rule), so the pattern allows no more.
        ToolSyntax::Llama3Json => vec![format!(
            r#"^\s*(?:{})?(\{{ ?"name" ?: ?")[\s\S]*$"#,
            regex_escape(LLAMA3_PYTHON_TAG)
        )],
    }
}

/// `text` as a literal in an ECMAScript regular expression (std::regex).
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "\\^$.|?*+()[]{}/-".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Split an answer into its text and the calls it holds in `syntax`.
#[must_use]
pub fn parse(syntax: ToolSyntax, text: &str) -> (String, Vec<Call>) {
    match syntax {
        ToolSyntax::Hermes => parse_hermes(text),
        ToolSyntax::Llama3Json => parse_llama3(text),
        ToolSyntax::Harmony => parse_harmony(text),
    }
}

/// Split a gpt-oss answer into its text and its Harmony calls: each
/// `to=functions.NAME` header (with the `<|start|>assistant` or
/// `<|channel|>commentary` around it) up to `<|message|>`, then the
/// arguments, a JSON value. The header is not content; a call cut short
/// stays in the content, as written.
#[must_use]
pub fn parse_harmony(text: &str) -> (String, Vec<Call>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(k) = rest.find(HARMONY_TO) {
        // The header starts at the last marker before the name that no
        // message body follows.
        let body_end = rest[..k]
            .rfind(HARMONY_MESSAGE)
            .map_or(0, |m| m + HARMONY_MESSAGE.len());
        let start = [HARMONY_START, HARMONY_CHANNEL]
            .iter()
            .filter_map(|m| rest[body_end..k].find(m).map(|i| body_end + i))
            .min()
            .unwrap_or(k);
        let after = &rest[k + HARMONY_TO.len()..];
        let name_len = after
            .find(|c: char| c.is_whitespace() || c == '<')
            .unwrap_or(after.len());
        let name = &after[..name_len];
        // Between the name and its `<|message|>` only a header's words (the
        // channel, `<|constrain|>json`): a name mentioned in text is not
        // paired with a later message.
        let call = after[name_len..]
            .find(HARMONY_MESSAGE)
            .filter(|&m| {
                let between = &after[name_len..name_len + m];
                between.len() <= 64 && !between.contains('\n') && !between.contains(HARMONY_START)
            })
            .and_then(|m| {
                let args = &after[name_len + m + HARMONY_MESSAGE.len()..];
                let mut values = serde_json::Deserializer::from_str(args).into_iter::<Value>();
                match values.next() {
                    Some(Ok(v)) if !name.is_empty() => Some((
                        Call {
                            name: name.to_string(),
                            arguments: v.to_string(),
                        },
                        name_len + m + HARMONY_MESSAGE.len() + values.byte_offset(),
                    )),
                    _ => None,
                }
            });
        match call {
            Some((c, len)) => {
                content.push_str(&rest[..start]);
                calls.push(c);
                rest = &after[len..];
            }
            None => {
                content.push_str(&rest[..k + HARMONY_TO.len()]);
                rest = after;
            }
        }
    }
    content.push_str(rest);
    let content = if calls.is_empty() {
        content
    } else {
        content.trim().to_string()
    };
    (content, calls)
}

/// A call the model wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function.
    pub name: String,
    /// Its arguments, as JSON text (OpenAI's `function.arguments`).
    pub arguments: String,
}

/// Split an answer into its text and its Hermes tool calls. Text outside
/// the blocks is the content; a block that is not a complete call (the
/// answer was cut short) stays in the content, as written.
#[must_use]
pub fn parse_hermes(text: &str) -> (String, Vec<Call>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find(HERMES_OPEN) {
        let after = &rest[open + HERMES_OPEN.len()..];
        let Some(close) = after.find(HERMES_CLOSE) else {
            break;
        };
        let call = serde_json::from_str::<Value>(after[..close].trim())
            .ok()
            .and_then(|v| {
                let name = v.get("name")?.as_str()?.to_string();
                let arguments = v.get("arguments").cloned().unwrap_or_else(|| json!({}));
                Some(Call {
                    name,
                    arguments: arguments.to_string(),
                })
            });
        match call {
            Some(c) => {
                content.push_str(&rest[..open]);
                calls.push(c);
            }
            None => {
                content.push_str(&rest[..open + HERMES_OPEN.len() + close + HERMES_CLOSE.len()])
            }
        }
        rest = &after[close + HERMES_CLOSE.len()..];
    }
    content.push_str(rest);
    let content = if calls.is_empty() {
        content
    } else {
        content.trim().to_string()
    };
    (content, calls)
}

/// Split a Llama 3.x answer into its text and its calls. The call is the
/// answer (after the `<|python_tag|>` the model may write first): a JSON
/// object with a string `name` and an object `parameters` (or
/// `arguments`), and more after `;`. An answer that opens with anything
/// else, or whose object is not a call or is cut short, is all content, as
/// llama.cpp's parser takes it.
#[must_use]
pub fn parse_llama3(text: &str) -> (String, Vec<Call>) {
    let t = text.trim_start();
    let mut rest = t.strip_prefix(LLAMA3_PYTHON_TAG).unwrap_or(t).trim_start();
    let mut calls = Vec::new();
    while rest.starts_with('{') {
        let mut objects = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let Some(Ok(v)) = objects.next() else { break };
        let args = v.get("parameters").or_else(|| v.get("arguments"));
        let (Some(name), Some(args)) = (v.get("name").and_then(Value::as_str), args) else {
            break;
        };
        if !args.is_object() {
            break;
        }
        calls.push(Call {
            name: name.to_string(),
            arguments: args.to_string(),
        });
        rest = rest[objects.byte_offset()..].trim_start_matches([';', ' ', '\n']);
    }
    if calls.is_empty() {
        (text.to_string(), calls)
    } else {
        (rest.trim().to_string(), calls)
    }
}

/// Streamed text while tools are offered: text passes until a tool call
/// opens (a part of an opening at the end is held back); from there on it
/// is kept, to be parsed into calls at the end.
#[derive(Debug)]
pub struct ToolSplit {
    syntax: ToolSyntax,
    held: String,
    phase: Phase,
}

/// Where a [`ToolSplit`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Text goes out; a call may open.
    Watching,
    /// A call opened: the rest is held, to be parsed at the end.
    Calling,
    /// No call can come any more (a Llama 3.x answer that opened with text).
    Plain,
}

impl ToolSplit {
    /// A split of calls written in `syntax`.
    #[must_use]
    pub fn new(syntax: ToolSyntax) -> Self {
        ToolSplit {
            syntax,
            held: String::new(),
            phase: Phase::Watching,
        }
    }

    /// The text of `piece` that can go out now as content.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        match self.phase {
            Phase::Calling => return String::new(),
            Phase::Plain => return std::mem::take(&mut self.held),
            Phase::Watching => {}
        }
        if self.syntax == ToolSyntax::Llama3Json {
            // The call is the whole answer: held when the answer opens
            // with it (or may), otherwise all content from then on.
            let t = self.held.trim_start();
            if t.is_empty() || LLAMA3_PYTHON_TAG.starts_with(t) {
                return String::new();
            }
            if t.starts_with('{') || t.starts_with(LLAMA3_PYTHON_TAG) {
                self.phase = Phase::Calling;
                return String::new();
            }
            self.phase = Phase::Plain;
            return std::mem::take(&mut self.held);
        }
        let openers = openers(self.syntax);
        let cut = match openers.iter().filter_map(|o| self.held.find(o)).min() {
            Some(i) => {
                self.phase = Phase::Calling;
                i
            }
            None => self.held.len() - held_back(&self.held, openers.iter().copied()),
        };
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        out
    }

    /// At the end: the content still held and the calls.
    pub fn finish(&mut self) -> (String, Vec<Call>) {
        let held = std::mem::take(&mut self.held);
        if self.phase == Phase::Plain {
            return (held, Vec::new());
        }
        parse(self.syntax, &held)
    }
}

/// OpenAI's `tool_calls` list: each call with its `id` (`base` and its
/// place), `type` and `function`, and (for stream deltas) its `index`.
#[must_use]
pub fn tool_calls_json(calls: &[Call], base: &str, indexed: bool) -> Value {
    Value::Array(
        calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut v = json!({
                    "id": format!("{base}-{i}"),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                });
                if indexed {
                    v["index"] = json!(i);
                }
                v
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_parsed_and_the_rest_is_content() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
        let (content, calls) = parse_hermes(text);
        assert_eq!(content, "Let me check.");
        assert_eq!(
            calls,
            vec![
                Call {
                    name: "get_weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into()
                },
                Call {
                    name: "f".into(),
                    arguments: "{}".into()
                },
            ]
        );
        // No call, or a cut-short one: all content, as written.
        assert_eq!(parse_hermes("Paris."), ("Paris.".into(), vec![]));
        let cut = "<tool_call>\n{\"name\": \"get_we";
        assert_eq!(parse_hermes(cut), (cut.into(), vec![]));
        let bad = "<tool_call>not json</tool_call> x";
        assert_eq!(parse_hermes(bad), (bad.into(), vec![]));
    }

    #[test]
    fn streamed_text_stops_at_the_call_even_with_the_tag_split() {
        let mut s = ToolSplit::new(ToolSyntax::Hermes);
        let mut out = String::new();
        for piece in [
            "Sure",
            ". <tool",
            "_call>\n{\"name\": \"f\", ",
            "\"arguments\": {}}\n</tool_call>",
        ] {
            out.push_str(&s.push(piece));
        }
        assert_eq!(out, "Sure. ");
        let (content, calls) = s.finish();
        assert_eq!(content, "");
        assert_eq!(
            calls,
            vec![Call {
                name: "f".into(),
                arguments: "{}".into()
            }]
        );
        // A "<" that opens no call is let through.
        let mut s = ToolSplit::new(ToolSyntax::Hermes);
        assert_eq!(s.push("1 <"), "1 ");
        assert_eq!(s.push(" 2"), "< 2");
        assert_eq!(s.finish(), (String::new(), vec![]));
    }

    #[test]
    fn llama3_calls_are_parsed_streamed_and_the_rest_is_content() {
        let text = r#"<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}"#;
        assert_eq!(
            parse_llama3(text),
            (
                String::new(),
                vec![Call {
                    name: "get_weather".into(),
                    arguments: r#"{"city":"Paris","unit":"celsius"}"#.into()
                }]
            )
        );
        // Two calls, `arguments` and a leading "type" too.
        let two = r#" {"name": "f", "parameters": {}}; {"type": "function", "name": "g", "arguments": {"a": 1}}"#;
        let (content, calls) = parse_llama3(two);
        assert_eq!(content, "");
        assert_eq!(
            calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["f", "g"]
        );
        // Text first (a call in prose or code is not one), JSON that is not a
        // call, a cut-short call, braces in prose: all content.
        for plain in [
            r#"Checking. {"name": "f", "parameters": {}}"#,
            r#"{"city": "Paris"}"#,
            r#"{"name": "f", "parame"#,
            "a {b} c",
            r#"{"name": "f", "parameters": 3}"#,
        ] {
            assert_eq!(parse_llama3(plain), (plain.to_string(), vec![]), "{plain}");
        }
        // Streamed: held from an opening brace, even split across pieces.
        let mut s = ToolSplit::new(ToolSyntax::Llama3Json);
        let mut out = String::new();
        for piece in [" ", "{", "\"na", "me\": \"f\", \"parameters\": {}}"] {
            out.push_str(&s.push(piece));
        }
        assert_eq!(out, "");
        assert_eq!(
            s.finish(),
            (
                String::new(),
                vec![Call {
                    name: "f".into(),
                    arguments: "{}".into()
                }]
            )
        );
        // An answer that opens with text goes out as it comes, braces too.
        let mut s = ToolSplit::new(ToolSyntax::Llama3Json);
        assert_eq!(s.push("x = "), "x = ");
        assert_eq!(s.push("{\"name\": 1}"), "{\"name\": 1}");
        assert_eq!(s.finish(), (String::new(), vec![]));
    }

    #[test]
    fn llama3_triggers_only_where_the_answer_opens_with_the_call() {
        let [pattern] = triggers(ToolSyntax::Llama3Json)
            .try_into()
            .expect("one pattern");
        assert!(
            pattern.starts_with('^') && pattern.ends_with('$'),
            "{pattern}"
        );
        assert!(pattern.contains(r#"(\{ ?"name" ?: ?")"#), "{pattern}");
        assert_eq!(
            triggers(ToolSyntax::Harmony),
            [r"[\s\S]*?(<\|channel\|>commentary to=functions\.| to=functions\.)[\s\S]*"]
        );
    }

    #[test]
    fn grammars_are_made_for_both_syntaxes() {
        let params = Schema {
            value: json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
            text: r#"{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}"#
                .into(),
        };
        let callable = [("f".to_string(), params)];
        let hermes = grammar(ToolSyntax::Hermes, &callable, true).expect("hermes");
        assert!(hermes.starts_with(r#"root ::= "<tool_call>""#), "{hermes}");
        let llama = grammar(ToolSyntax::Llama3Json, &callable, true).expect("llama3");
        assert!(llama.starts_with("root ::= tool-call\n"), "{llama}");
        assert!(llama.contains("parameters"), "{llama}");
        let harmony = grammar(ToolSyntax::Harmony, &callable, false).expect("harmony");
        assert!(harmony.contains("f0-root ::="), "{harmony}");
        assert!(
            harmony.contains(r#""<|channel|>commentary to=functions." "f" " <|constrain|>json<|message|>" f0-root"#),
            "{harmony}"
        );
    }

    #[test]
    fn ids_and_indexes_take_openai_s_shape() {
        let calls = [Call {
            name: "f".into(),
            arguments: "{}".into(),
        }];
        let v = tool_calls_json(&calls, "call-1", true);
        assert_eq!(
            v,
            json!([{"id": "call-1-0", "type": "function", "index": 0, "function": {"name": "f", "arguments": "{}"}}])
        );
    }
}

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

use crate::runner::template::{HERMES_CLOSE, HERMES_OPEN, ToolSyntax};

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

/// The function's name follows this in a Harmony call's header.
const HARMONY_TO: &str = " to=functions.";

/// Harmony's grammar: one call, its header in either order gpt-oss writes
/// (`<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`,
/// or ` to=functions.NAME<|channel|>commentary json<|message|>` after the
/// `<|start|>assistant` the prompt ends with), then arguments valid for that
/// function's schema. Each function's arguments grammar is the converter's,
/// its rules renamed apart so that a name goes only with its own schema.
fn harmony_grammar(callable: &[(String, Schema)]) -> Result<String, String> {
    let mut alternatives = Vec::new();
    let mut rules = String::new();
    for (i, (name, params)) in callable.iter().enumerate() {
        let converted = crate::llama::grammar::schema_grammar(&params.text)?;
        rules.push_str(&prefix_rules(&converted, &format!("f{i}-")));
        rules.push('\n');
        let quoted = json!(name).to_string();
        let literal = |s: &str| json!(s).to_string();
        alternatives.push(format!(
            "{} {quoted} {} f{i}-root",
            literal("<|channel|>commentary to=functions."),
            literal(" <|constrain|>json<|message|>")
        ));
        alternatives.push(format!(
            "{} {quoted} {} f{i}-root",
            literal(HARMONY_TO),
            literal("<|channel|>commentary json<|message|>")
        ));
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
            c if is_name(c) => {
                let mut name = String::from(c);
                while let Some(&d) = chars.peek().filter(|d| is_name(**d)) {
                    name.push(d);
                    chars.next();
                }
                // Repetition counts (`{1,2}`) are numbers, not names.
                if name.chars().all(|d| d.is_ascii_digit()) {
                    out.push_str(&name);
                } else {
                    out.push_str(prefix);
                    out.push_str(&name);
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// Where a call in `syntax` starts in the text, for a lazy grammar (`auto`)
/// to take over from and for a stream to hold back from.
#[must_use]
pub fn openers(syntax: ToolSyntax) -> &'static [&'static str] {
    match syntax {
        ToolSyntax::Hermes => &[HERMES_OPEN],
        // What llama.cpp's Llama 3.x handler triggers on: the object's
        // first key, with or without a space.
        ToolSyntax::Llama3Json => &[r#"{"name""#, r#"{ "name""#],
        // The headers as the answer holds them, `<|start|>assistant` and
        // all (it is not content).
        ToolSyntax::Harmony => &[
            "<|start|>assistant<|channel|>commentary to=functions.",
            "<|start|>assistant to=functions.",
            "<|channel|>commentary to=functions.",
            HARMONY_TO,
        ],
    }
}

/// The texts a lazy grammar (`auto`) takes over from: where the grammar
/// of `syntax` starts.
#[must_use]
pub fn triggers(syntax: ToolSyntax) -> &'static [&'static str] {
    match syntax {
        ToolSyntax::Hermes | ToolSyntax::Llama3Json => openers(syntax),
        ToolSyntax::Harmony => &["<|channel|>commentary to=functions.", HARMONY_TO],
    }
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
    const TO: &str = "to=functions.";
    const MESSAGE: &str = "<|message|>";
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(k) = rest.find(TO) {
        // The header starts at the last marker before the name that no
        // message body follows.
        let body_end = rest[..k].rfind(MESSAGE).map_or(0, |m| m + MESSAGE.len());
        let start = ["<|start|>", "<|channel|>"]
            .iter()
            .filter_map(|m| rest[body_end..k].find(m).map(|i| body_end + i))
            .min()
            .unwrap_or(k);
        let after = &rest[k + TO.len()..];
        let name_len = after
            .find(|c: char| c.is_whitespace() || c == '<')
            .unwrap_or(after.len());
        let name = &after[..name_len];
        let call = after[name_len..].find(MESSAGE).and_then(|m| {
            let args = &after[name_len + m + MESSAGE.len()..];
            let mut values = serde_json::Deserializer::from_str(args).into_iter::<Value>();
            match values.next() {
                Some(Ok(v)) if !name.is_empty() => Some((
                    Call {
                        name: name.to_string(),
                        arguments: v.to_string(),
                    },
                    name_len + m + MESSAGE.len() + values.byte_offset(),
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
                content.push_str(&rest[..k + TO.len()]);
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

/// Split a Llama 3.x answer into its text and its calls: each JSON object
/// with a string `name` and an object `parameters` (or `arguments`) is a
/// call, optionally after the `<|python_tag|>` the model may write first;
/// the rest is content. A cut-short object stays in the content.
#[must_use]
pub fn parse_llama3(text: &str) -> (String, Vec<Call>) {
    const PYTHON_TAG: &str = "<|python_tag|>";
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let mut objects = serde_json::Deserializer::from_str(&rest[open..]).into_iter::<Value>();
        let call = match objects.next() {
            Some(Ok(v)) => {
                let args = v.get("parameters").or_else(|| v.get("arguments"));
                match (v.get("name").and_then(Value::as_str), args) {
                    (Some(name), Some(args)) if args.is_object() => Some((
                        Call {
                            name: name.to_string(),
                            arguments: args.to_string(),
                        },
                        objects.byte_offset(),
                    )),
                    _ => None,
                }
            }
            _ => None,
        };
        match call {
            Some((c, len)) => {
                let before = rest[..open].trim_end();
                content.push_str(before.strip_suffix(PYTHON_TAG).unwrap_or(before));
                calls.push(c);
                rest = rest[open + len..].trim_start_matches([';', ' ', '\n']);
            }
            None => {
                content.push_str(&rest[..=open]);
                rest = &rest[open + 1..];
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

/// Streamed text while tools are offered: text passes until a tool call
/// opens (a part of an opening at the end is held back); from there on it
/// is kept, to be parsed into calls at the end.
#[derive(Debug)]
pub struct ToolSplit {
    syntax: ToolSyntax,
    held: String,
    calling: bool,
}

impl ToolSplit {
    /// A split of calls written in `syntax`.
    #[must_use]
    pub fn new(syntax: ToolSyntax) -> Self {
        ToolSplit {
            syntax,
            held: String::new(),
            calling: false,
        }
    }

    /// The text of `piece` that can go out now as content.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        if self.calling {
            return String::new();
        }
        let openers = openers(self.syntax);
        if let Some(i) = openers.iter().filter_map(|o| self.held.find(o)).min() {
            self.calling = true;
            let out = self.held[..i].to_string();
            self.held.drain(..i);
            return out;
        }
        let keep = openers
            .iter()
            .map(|o| partial_suffix(&self.held, o))
            .max()
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        out
    }

    /// At the end: the content still held and the calls.
    pub fn finish(&mut self) -> (String, Vec<Call>) {
        let held = std::mem::take(&mut self.held);
        parse(self.syntax, &held)
    }
}

/// The length of the longest end of `s` that starts `tag`.
fn partial_suffix(s: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| {
            s.len() >= n && s.is_char_boundary(s.len() - n) && tag.starts_with(&s[s.len() - n..])
        })
        .unwrap_or(0)
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
        // Two calls, `arguments` too; text before them is content.
        let two = r#"Checking. {"name": "f", "parameters": {}}; {"name": "g", "arguments": {"a": 1}}"#;
        let (content, calls) = parse_llama3(two);
        assert_eq!(content, "Checking.");
        assert_eq!(calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["f", "g"]);
        // JSON that is not a call, a cut-short call, braces in prose: content.
        for plain in [
            r#"{"city": "Paris"}"#,
            r#"{"name": "f", "parame"#,
            "a {b} c",
            r#"{"name": "f", "parameters": 3}"#,
        ] {
            assert_eq!(parse_llama3(plain), (plain.to_string(), vec![]), "{plain}");
        }
        // Streamed: held from the opening, even split across pieces.
        let mut s = ToolSplit::new(ToolSyntax::Llama3Json);
        let mut out = String::new();
        for piece in ["Sure {", "\"na", "me\": \"f\", \"parameters\": {}}"] {
            out.push_str(&s.push(piece));
        }
        assert_eq!(out, "Sure ");
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
        // Braces that open no call go out.
        let mut s = ToolSplit::new(ToolSyntax::Llama3Json);
        assert_eq!(s.push("x = {"), "x = ");
        assert_eq!(s.push("1}"), "{1}");
    }

    #[test]
    fn harmony_calls_are_parsed_in_either_header_order() {
        let want = vec![Call {
            name: "get_weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        }];
        for text in [
            r#"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}"#,
            r#"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}"#,
            r#" to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}"#,
        ] {
            assert_eq!(parse_harmony(text), (String::new(), want.clone()), "{text}");
        }
        // Text before the call is content; a call cut short stays content.
        let (content, calls) = parse_harmony(
            r#"Let me look.<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}"#,
        );
        assert_eq!((content.as_str(), calls), ("Let me look.", want));
        let cut = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"ci";
        assert_eq!(parse_harmony(cut), (cut.to_string(), vec![]));
        // Streamed: held from the header on.
        let mut s = ToolSplit::new(ToolSyntax::Harmony);
        let mut out = String::new();
        for piece in ["Ok.", "<|channel|>comm", "entary to=functions.f <|constrain|>json<|message|>{}"] {
            out.push_str(&s.push(piece));
        }
        assert_eq!(out, "Ok.");
        assert_eq!(
            s.finish(),
            (String::new(), vec![Call { name: "f".into(), arguments: "{}".into() }])
        );
    }

    #[test]
    fn rule_names_are_prefixed_outside_literals_and_classes() {
        let g = "root ::= \"{\" space a-kv \"}\" # root's\na-kv ::= \"\\\"a\\\"\" space [a-z\\]]{1,2}\nspace ::= | \" \"";
        assert_eq!(
            prefix_rules(g, "f0-"),
            "f0-root ::= \"{\" f0-space f0-a-kv \"}\" # root's\nf0-a-kv ::= \"\\\"a\\\"\" f0-space [a-z\\]]{1,2}\nf0-space ::= | \" \""
        );
    }

    #[test]
    fn grammars_are_made_for_both_syntaxes() {
        let params = Schema {
            value: json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
            text: r#"{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}"#.into(),
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

//! A thinking model's answer taken apart as it streams: its reasoning and
//! its content. `<think>…</think>` tags (Qwen3, DeepSeek-R1 and their
//! distills) as llama-server's `deepseek` reasoning format takes them, and
//! gpt-oss's Harmony channels. `serve` puts the reasoning into
//! `reasoning_content`; `run` writes it to stderr.

use super::template::ChatFormat;
use super::text::held_back;

/// The tags a thinking model writes its reasoning between.
pub const THINK_OPEN: &str = "<think>";
/// See [`THINK_OPEN`].
pub const THINK_CLOSE: &str = "</think>";

/// Splits a thinking model's answer, as it streams, into reasoning and
/// content as llama-server's `deepseek` reasoning format does: text between
/// a leading `<think>` (or from the start, when the prompt already opened
/// it) and `</think>` is reasoning, the rest content (its leading
/// whitespace dropped); a tag split across pieces is held back until it is
/// whole. An answer that does not start with `<think>` is all content.
#[derive(Debug, Clone)]
pub struct ReasoningSplit {
    mode: Mode,
    held: String,
}

/// Which format the answer is in, and where in it the split is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `<think>` tags.
    Tags(Think),
    /// gpt-oss's channels (see [`ReasoningSplit::harmony`]).
    Harmony(Channel),
}

/// The Harmony channel a gpt-oss answer is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Channel {
    /// Between messages: a header (`<|channel|>analysis<|message|>`,
    /// `<|start|>assistant…`) is being read.
    Header,
    /// `analysis`: reasoning.
    Analysis,
    /// `final`, `commentary` or text outside any channel: content.
    Content,
}

/// gpt-oss's message markers. llama.cpp prints these (it marks them
/// user-defined, and `<|end|>` too); `<|return|>` and `<|call|>` end the
/// generation.
pub(crate) const HARMONY_START: &str = "<|start|>";
pub(crate) const HARMONY_CHANNEL: &str = "<|channel|>";
pub(crate) const HARMONY_MESSAGE: &str = "<|message|>";
/// A tool call's recipient in a header; the function's name follows.
pub(crate) const HARMONY_TO: &str = "to=functions.";
/// Ends a message; llama.cpp prints it for gpt-oss (it takes it off the
/// end-of-generation list and marks it user-defined).
const HARMONY_END: &str = "<|end|>";
/// The longest header taken (`<|start|>assistant<|channel|>commentary
/// to=functions.NAME <|constrain|>json`, with a long function name).
const HARMONY_MAX_HEADER: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Think {
    /// Before any text: a `<think>` may come.
    Start,
    /// Inside the reasoning.
    In,
    /// After `</think>`, before the content's first non-space.
    After,
    /// Content.
    Out,
}

impl ReasoningSplit {
    /// `opened`: the prompt ends with `<think>` (the template opened it).
    #[must_use]
    pub fn new(opened: bool) -> ReasoningSplit {
        ReasoningSplit {
            mode: Mode::Tags(if opened { Think::In } else { Think::Start }),
            held: String::new(),
        }
    }

    /// The split for an answer to `prompt` in `format`: Harmony's for a
    /// Harmony template, tags for one that thinks (opened when the prompt
    /// ends with `<think>`, as DeepSeek-R1's does), none otherwise.
    #[must_use]
    pub fn for_format(format: &ChatFormat, prompt: &str) -> Option<ReasoningSplit> {
        if format.harmony() {
            Some(ReasoningSplit::harmony())
        } else if format.thinks() {
            Some(ReasoningSplit::new(prompt.trim_end().ends_with(THINK_OPEN)))
        } else {
            None
        }
    }

    /// For gpt-oss's Harmony format, as llama-server's reasoning parser
    /// takes it: the answer is a run of messages,
    /// `<|channel|>analysis<|message|>…` then
    /// `<|start|>assistant<|channel|>final<|message|>…`; the `analysis`
    /// channel is reasoning, the `final` (and `commentary`) channel content,
    /// and the headers are neither. Text before any header is content.
    #[must_use]
    pub fn harmony() -> ReasoningSplit {
        ReasoningSplit {
            mode: Mode::Harmony(Channel::Header),
            held: String::new(),
        }
    }

    /// [`ReasoningSplit::push`] for Harmony.
    fn push_harmony(&mut self, at: Channel) -> (String, String) {
        let (mut reasoning, mut content) = (String::new(), String::new());
        let mut at = at;
        loop {
            if at == Channel::Header {
                let t = self.held.trim_start();
                let ws = self.held.len() - t.len();
                if t.starts_with(HARMONY_END) {
                    // The end of the message before: nobody's text.
                    self.held.drain(..ws + HARMONY_END.len());
                    continue;
                }
                // A call may open the answer with its recipient, right
                // after the prompt's `<|start|>assistant`.
                let heads = [HARMONY_START, HARMONY_CHANNEL, HARMONY_TO];
                let Some(head) = heads.iter().find(|h| t.starts_with(**h)) else {
                    if !t.is_empty() && heads.iter().chain([&HARMONY_END]).any(|h| h.starts_with(t))
                    {
                        break;
                    }
                    // Not a header: plain text until the next one.
                    at = Channel::Content;
                    continue;
                };
                // A header is short and on one line: text that opens like
                // one but runs on (the model writing about Harmony, or an
                // answer cut short) is content.
                let header = self.held.find(HARMONY_MESSAGE).filter(|&i| {
                    i >= ws && i - ws <= HARMONY_MAX_HEADER && !self.held[ws..i].contains('\n')
                });
                let Some(i) = header else {
                    let open = self.held.len() - ws <= HARMONY_MAX_HEADER
                        && !self.held[ws..].contains('\n');
                    if open {
                        break;
                    }
                    content.push_str(&self.held[..ws + head.len()]);
                    self.held.drain(..ws + head.len());
                    at = Channel::Content;
                    continue;
                };
                let head = &self.held[..i];
                if head.contains(HARMONY_TO) {
                    // A tool call: its header stays with it, for the
                    // tool split to read the function's name.
                    content.push_str(&self.held[..i + HARMONY_MESSAGE.len()]);
                    self.held.drain(..i + HARMONY_MESSAGE.len());
                    at = Channel::Content;
                    continue;
                }
                let channel = head
                    .rfind(HARMONY_CHANNEL)
                    .map(|c| &head[c + HARMONY_CHANNEL.len()..])
                    .unwrap_or("");
                at = if channel.trim_start().starts_with("analysis") {
                    Channel::Analysis
                } else {
                    Channel::Content
                };
                self.held.drain(..i + HARMONY_MESSAGE.len());
                continue;
            }
            let out = if at == Channel::Analysis {
                &mut reasoning
            } else {
                &mut content
            };
            // The body runs to its `<|end|>` or the next message's header.
            let markers = [HARMONY_END, HARMONY_START, HARMONY_CHANNEL];
            let next = markers
                .iter()
                .filter_map(|m| self.held.find(m).map(|j| (j, *m)))
                .min();
            if let Some((j, marker)) = next {
                out.push_str(&self.held[..j]);
                let end = if marker == HARMONY_END {
                    j + marker.len()
                } else {
                    j
                };
                self.held.drain(..end);
                at = Channel::Header;
                continue;
            }
            let cut = self.held.len() - held_back(&self.held, markers);
            out.push_str(&self.held[..cut]);
            self.held.drain(..cut);
            break;
        }
        self.mode = Mode::Harmony(at);
        (reasoning, content)
    }

    /// The next piece of the answer: (reasoning, content) safe to send.
    pub fn push(&mut self, piece: &str) -> (String, String) {
        self.held.push_str(piece);
        match self.mode {
            Mode::Harmony(at) => self.push_harmony(at),
            Mode::Tags(state) => self.push_tags(state),
        }
    }

    /// [`ReasoningSplit::push`] for `<think>` tags.
    fn push_tags(&mut self, mut state: Think) -> (String, String) {
        let (mut reasoning, mut content) = (String::new(), String::new());
        loop {
            match state {
                Think::Start => {
                    let t = self.held.trim_start();
                    if let Some(rest) = t.strip_prefix(THINK_OPEN) {
                        self.held = rest.to_string();
                        state = Think::In;
                    } else if THINK_OPEN.starts_with(t) {
                        // Maybe the tag's beginning: wait.
                        break;
                    } else {
                        state = Think::Out;
                    }
                }
                Think::In => {
                    if let Some(i) = self.held.find(THINK_CLOSE) {
                        reasoning.push_str(&self.held[..i]);
                        self.held = self.held[i + THINK_CLOSE.len()..].to_string();
                        state = Think::After;
                    } else {
                        let cut = self.held.len() - held_back(&self.held, [THINK_CLOSE]);
                        reasoning.push_str(&self.held[..cut]);
                        self.held.drain(..cut);
                        break;
                    }
                }
                Think::After => {
                    let t = self.held.trim_start();
                    if t.is_empty() {
                        self.held.clear();
                        break;
                    }
                    self.held = t.to_string();
                    state = Think::Out;
                }
                Think::Out => {
                    content.push_str(&self.held);
                    self.held.clear();
                    break;
                }
            }
        }
        self.mode = Mode::Tags(state);
        (reasoning, content)
    }

    /// The end of the answer: what was held back (an unclosed reasoning
    /// stays reasoning, as llama-server reports it).
    pub fn finish(&mut self) -> (String, String) {
        let held = std::mem::take(&mut self.held);
        match self.mode {
            // A header cut short is neither reasoning nor content; other
            // text held there (a marker's first characters) is content.
            Mode::Harmony(Channel::Header) => {
                let t = held.trim_start();
                let cut_header = [HARMONY_START, HARMONY_CHANNEL, HARMONY_TO, HARMONY_END]
                    .iter()
                    .any(|h| t.starts_with(h) || h.starts_with(t));
                if cut_header {
                    (String::new(), String::new())
                } else {
                    (String::new(), held)
                }
            }
            Mode::Harmony(Channel::Analysis) | Mode::Tags(Think::In) => (held, String::new()),
            Mode::Tags(Think::After) => (String::new(), String::new()),
            Mode::Harmony(Channel::Content) | Mode::Tags(Think::Start | Think::Out) => {
                (String::new(), held)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything `split` makes of `pieces`: (reasoning, content).
    fn run_split(mut split: ReasoningSplit, pieces: &[&str]) -> (String, String) {
        let (mut r, mut c) = (String::new(), String::new());
        for p in pieces {
            let (a, b) = split.push(p);
            r.push_str(&a);
            c.push_str(&b);
        }
        let (a, b) = split.finish();
        (r + &a, c + &b)
    }

    fn split_all(pieces: &[&str], opened: bool) -> (String, String) {
        run_split(ReasoningSplit::new(opened), pieces)
    }

    fn harmony_all(pieces: &[&str]) -> (String, String) {
        run_split(ReasoningSplit::harmony(), pieces)
    }

    /// gpt-oss's answer as llama.cpp prints it (`<|end|>` included: its
    /// vocabulary marks it user-defined).
    #[test]
    fn harmony_analysis_is_reasoning_and_final_is_content() {
        let text = "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|><|start|>assistant<|channel|>final<|message|>2 + 2 = 4.";
        let want = (
            "User asks 2+2. Answer 4.".to_string(),
            "2 + 2 = 4.".to_string(),
        );
        assert_eq!(harmony_all(&[text]), want);
        // One character a piece: markers split anywhere.
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(harmony_all(&refs), want);
        // Straight to the final channel; a commentary preamble is content.
        assert_eq!(
            harmony_all(&["<|channel|>final<|message|>Hi."]),
            (String::new(), "Hi.".to_string())
        );
        assert_eq!(
            harmony_all(&[
                "<|channel|>commentary<|message|>Looking.<|end|><|start|>assistant<|channel|>final<|message|>Done."
            ]),
            (String::new(), "Looking.Done.".to_string())
        );
        // Without `<|end|>` (an older llama.cpp) the next header still ends it.
        assert_eq!(
            harmony_all(&[
                "<|channel|>analysis<|message|>a<|start|>assistant<|channel|>final<|message|>b"
            ]),
            ("a".to_string(), "b".to_string())
        );
        // A marker in prose that opens no header, and one a long way from
        // any `<|message|>`: content, nothing lost.
        let prose = "Harmony uses <|start|> to open a message, and then\nmore <|message|> text.";
        assert_eq!(harmony_all(&[prose]), (String::new(), prose.to_string()));
        let cut = "Answer: <|channel|>";
        assert_eq!(harmony_all(&[cut]), (String::new(), "Answer: ".to_string()));
        // A call's header goes to content whole, for the tool split.
        let call = r#" to=functions.f<|channel|>commentary json<|message|>{"a": 1}"#;
        assert_eq!(harmony_all(&[call]), (String::new(), call.to_string()));
        let call = r#"<|channel|>analysis<|message|>Need f.<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}"#;
        assert_eq!(
            harmony_all(&[call]),
            (
                "Need f.".to_string(),
                "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}".to_string()
            )
        );
        // No header at all: content as written; a "<" that opens none too.
        assert_eq!(
            harmony_all(&["Plain <b>text</b>"]),
            (String::new(), "Plain <b>text</b>".to_string())
        );
        // Cut short in the analysis: reasoning; in a header: nothing.
        assert_eq!(
            harmony_all(&["<|channel|>analysis<|message|>thinking <|sta"]),
            ("thinking <|sta".to_string(), String::new())
        );
        assert_eq!(
            harmony_all(&["<|channel|>analysis<|message|>a<|start|>assistant<|chan"]),
            ("a".to_string(), String::new())
        );
    }

    #[test]
    fn thinking_is_split_out_even_with_tags_across_pieces() {
        let want = ("plan it".to_string(), "Paris.".to_string());
        assert_eq!(
            split_all(&["<think>plan it</think>\n\nParis."], false),
            want
        );
        assert_eq!(
            split_all(
                &["<th", "ink>pl", "an it</", "thi", "nk>", "\n", "Par", "is."],
                false
            ),
            want
        );
        // One character a piece.
        let text = "<think>plan it</think> Paris.";
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(split_all(&refs, false), want);
        // The template opened the tag: the answer starts inside it.
        assert_eq!(split_all(&["plan it</think>Paris."], true), want);
        // No tag: all content, unchanged (a "<" that is not the tag too).
        assert_eq!(
            split_all(&["<b>Paris</b>", " is <think>"], false),
            (String::new(), "<b>Paris</b> is <think>".to_string())
        );
        assert_eq!(
            split_all(&["<thi"], false),
            (String::new(), "<thi".to_string())
        );
        // Unclosed: all reasoning; a held partial tag is flushed.
        assert_eq!(
            split_all(&["<think>still going</thi"], false),
            ("still going</thi".to_string(), String::new())
        );
        // Multi-byte text next to a partial tag.
        assert_eq!(
            split_all(&["<think>é</", "think>ü"], false),
            ("é".to_string(), "ü".to_string())
        );
    }
}

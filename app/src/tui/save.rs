//! `/save` and `/load`: the conversation as Markdown (to read) or JSON (to
//! read back), written atomically: a temporary file beside the target, synced,
//! then renamed over it, so a crash never leaves half a file.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::state::{App, Entry, Role, Turn, TurnState};
use super::theme::Level;

/// Layout version of the JSON save.
pub const SAVE_SCHEMA_VERSION: u32 = 1;

/// A saved conversation (the JSON file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedChat {
    /// Layout version.
    pub schema_version: u32,
    /// The model it was held with.
    #[serde(default)]
    pub model: String,
    /// The system prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// The turns, oldest first.
    pub messages: Vec<SavedMessage>,
}

/// One saved turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
    /// False for turns dropped from the context when it was full.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub in_context: bool,
}

fn yes() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_true(b: &bool) -> bool {
    *b
}

/// The file format, from the extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.md`, `.markdown`.
    Markdown,
    /// `.json`.
    Json,
}

impl Format {
    /// The format for a path.
    ///
    /// # Errors
    /// Another extension.
    pub fn of(path: &Path) -> Result<Format> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "md" | "markdown" => Ok(Format::Markdown),
            "json" => Ok(Format::Json),
            _ => bail!(
                "{}: give a .md (Markdown) or .json (JSON) file name",
                path.display()
            ),
        }
    }
}

/// The conversation as a [`SavedChat`].
#[must_use]
pub fn snapshot(app: &App) -> SavedChat {
    SavedChat {
        schema_version: SAVE_SCHEMA_VERSION,
        model: app.plan.model.clone(),
        system: app.system.clone(),
        messages: app
            .turns()
            .map(|t| SavedMessage {
                role: match t.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                }
                .to_string(),
                content: t.text.clone(),
                in_context: t.in_context,
            })
            .collect(),
    }
}

/// The conversation as Markdown.
#[must_use]
pub fn markdown(chat: &SavedChat) -> String {
    let mut s = format!("# Chat with {}\n", chat.model);
    if let Some(sys) = &chat.system {
        s.push_str(&format!("\n## System\n\n{sys}\n"));
    }
    for m in &chat.messages {
        let who = if m.role == "user" {
            "You"
        } else {
            chat.model.as_str()
        };
        let note = if m.in_context {
            ""
        } else {
            " (dropped from the context)"
        };
        s.push_str(&format!("\n## {who}{note}\n\n{}\n", m.content.trim_end()));
    }
    s
}

/// Write the conversation to `path` (format by extension), atomically.
///
/// # Errors
/// An unknown extension, or the file cannot be written.
pub fn save(chat: &SavedChat, path: &Path) -> Result<()> {
    let text = match Format::of(path)? {
        Format::Markdown => markdown(chat),
        Format::Json => serde_json::to_string_pretty(chat)? + "\n",
    };
    crate::files::write(path, text.as_bytes())
}

/// Read a JSON save.
///
/// # Errors
/// Not JSON, not a save, a newer layout, or an unknown role.
pub fn load(path: &Path) -> Result<SavedChat> {
    if Format::of(path)? != Format::Json {
        bail!(
            "{}: only JSON saves can be loaded (save one with /save FILE.json)",
            path.display()
        );
    }
    // Far above any context a model has; a file that size is not a chat.
    let text =
        crate::files::read_text(path, 64 << 20, "a saved chat").context("reading a saved chat")?;
    let mut chat: SavedChat = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a headroom chat save", path.display()))?;
    if chat.schema_version > SAVE_SCHEMA_VERSION {
        bail!(
            "{}: saved by a newer headroom (layout {}, this one reads {SAVE_SCHEMA_VERSION})",
            path.display(),
            chat.schema_version
        );
    }
    // A system message in the list (other tools write it there) becomes the system prompt.
    if let Some(i) = chat.messages.iter().position(|m| m.role == "system") {
        let m = chat.messages.remove(i);
        chat.system.get_or_insert(m.content);
    }
    if let Some(bad) = chat
        .messages
        .iter()
        .find(|m| m.role != "user" && m.role != "assistant")
    {
        bail!(
            "{}: unknown role '{}' (user, assistant or system)",
            path.display(),
            bad.role
        );
    }
    Ok(chat)
}

impl App {
    /// Replace the conversation with a loaded one.
    pub fn replace_conversation(&mut self, chat: SavedChat, from: &Path) {
        self.entries.clear();
        self.system = chat.system;
        let n = chat.messages.len();
        for m in chat.messages {
            self.entries.push(Entry::Turn(Turn {
                role: if m.role == "user" {
                    Role::User
                } else {
                    Role::Assistant
                },
                text: m.content,
                state: TurnState::Done,
                in_context: m.in_context,
            }));
        }
        self.scroll = None;
        self.ctx_warned = false;
        self.notice(
            Level::Info,
            format!("loaded {n} messages from {}", from.display()),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat() -> SavedChat {
        SavedChat {
            schema_version: 1,
            model: "tiny".into(),
            system: Some("be brief".into()),
            messages: vec![
                SavedMessage {
                    role: "user".into(),
                    content: "hi".into(),
                    in_context: false,
                },
                SavedMessage {
                    role: "assistant".into(),
                    content: "hello\n".into(),
                    in_context: true,
                },
            ],
        }
    }

    #[test]
    fn json_round_trips_and_markdown_reads_well() {
        let dir = tempfile::tempdir().expect("tempdir");
        let json = dir.path().join("c.json");
        save(&chat(), &json).expect("saved");
        assert_eq!(load(&json).expect("loaded"), chat());
        let md = dir.path().join("c.md");
        save(&chat(), &md).expect("saved");
        let text = std::fs::read_to_string(&md).expect("read");
        assert_eq!(
            text,
            "# Chat with tiny\n\n## System\n\nbe brief\n\n## You (dropped from the context)\n\nhi\n\n## tiny\n\nhello\n"
        );
        // Nothing but the two files is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 2);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(save(&chat(), &dir.path().join("c.txt")).is_err());
        let p = dir.path().join("x.json");
        std::fs::write(
            &p,
            "{\"schema_version\":1,\"messages\":[{\"role\":\"tool\",\"content\":\"\"}]}",
        )
        .expect("write");
        assert!(format!("{:#}", load(&p).expect_err("bad role")).contains("unknown role 'tool'"));
        std::fs::write(&p, "[1,2]").expect("write");
        assert!(
            format!("{:#}", load(&p).expect_err("not a save")).contains("not a headroom chat save")
        );
        let missing = dir.path().join("nope").join("c.json");
        assert!(save(&chat(), &missing).is_err());
    }
}

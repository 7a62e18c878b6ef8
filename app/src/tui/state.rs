//! Everything the chat screen shows, as plain data: the conversation, the
//! input, what the plan promised and what the process uses now. Changed only
//! by [`update`](super::update); drawn only by [`view`](super::view).

use std::cell::RefCell;
use std::rc::Rc;

use headroom_planner::hw::format_size;
use headroom_planner::plan::{DeviceKind, Plan};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui_textarea::{TextArea, WrapMode};

use super::theme::{Level, Theme};
use crate::runner::StopReason;
use crate::runner::template::Message;

/// Share of the context at which the status bar warns.
pub const CONTEXT_WARN: f64 = 0.8;

/// What the plan said, in the form the screen needs.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInfo {
    /// Short model name (the file name without `.gguf`).
    pub model: String,
    /// Quantization label (`Q4_K_M`).
    pub quant: String,
    /// Context size the plan chose.
    pub n_ctx: u32,
    /// Layers on GPUs.
    pub n_gpu_layers: u32,
    /// RAM the plan may use.
    pub ram_budget: u64,
    /// Planned peak resident set.
    pub ram_planned: u64,
    /// GPUs: name, planned total, budget.
    pub gpus: Vec<GpuPlan>,
    /// Planned decode speed.
    pub est_decode_tps: f64,
    /// The plan's one-line summary.
    pub summary: String,
    /// The plan's warnings (offload, pages from disk, …) and any disagreement
    /// with llama.cpp's own accounting.
    pub warnings: Vec<String>,
}

/// One GPU in the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPlan {
    /// Device name.
    pub name: String,
    /// What the plan puts there.
    pub planned: u64,
    /// What it may use there.
    pub budget: u64,
}

impl PlanInfo {
    /// The screen's view of a plan; `extra_warnings` are added to its own.
    #[must_use]
    pub fn from_plan(plan: &Plan, extra_warnings: Vec<String>) -> PlanInfo {
        let model = std::path::Path::new(&plan.model.path)
            .file_stem()
            .map_or_else(
                || plan.model.path.clone(),
                |s| s.to_string_lossy().into_owned(),
            );
        PlanInfo {
            model,
            quant: plan.quant.clone(),
            n_ctx: plan.n_ctx,
            n_gpu_layers: plan.n_gpu_layers,
            ram_budget: plan.ram.budget_bytes,
            ram_planned: plan.ram.peak_bytes,
            gpus: plan
                .devices
                .iter()
                .filter(|d| d.kind == DeviceKind::Gpu)
                .map(|d| GpuPlan {
                    name: d.name.clone(),
                    planned: d.total_bytes,
                    budget: d.budget_bytes,
                })
                .collect(),
            est_decode_tps: plan.est_decode_tokens_per_s,
            summary: crate::render::summary(plan),
            // A refusal shows its reason on its own.
            warnings: plan
                .warnings
                .iter()
                .filter(|w| w.code != headroom_planner::plan::WarningCode::DoesNotFit)
                .map(|w| w.message.clone())
                .chain(extra_warnings)
                .collect(),
        }
    }

    /// The banner shown above the conversation.
    #[must_use]
    pub fn banner(&self) -> Vec<Notice> {
        let mut out = vec![Notice::new(
            Level::Info,
            format!(
                "{} · plan: {} · planned peak RAM {} of {}",
                self.model,
                self.summary,
                format_size(self.ram_planned),
                format_size(self.ram_budget)
            ),
        )];
        out.extend(
            self.warnings
                .iter()
                .map(|w| Notice::new(Level::Warn, w.clone())),
        );
        out
    }
}

/// Memory the process uses, sampled about once a second.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// Resident set now.
    pub rss: u64,
    /// Peak resident set so far (`VmHWM`).
    pub peak: u64,
    /// GPU memory the chat added since it started, per GPU (device-wide use
    /// now less the use before the load).
    pub vram: Vec<u64>,
}

/// Who wrote a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
}

/// How a turn stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnState {
    /// Complete.
    Done,
    /// The model is writing it.
    Streaming,
    /// Stopped by Esc or Ctrl+C.
    Stopped,
    /// Cut off by a full context.
    ContextFull,
    /// Generation failed.
    Failed,
}

/// One turn of the conversation.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Who wrote it.
    pub role: Role,
    /// The text.
    pub text: String,
    /// How it stands.
    pub state: TurnState,
    /// Whether it is still sent to the model (the oldest turns are dropped
    /// when the context is full; they stay on screen, dimmed).
    pub in_context: bool,
}

/// A line from headroom itself: the banner, a warning, a command's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// How serious.
    pub level: Level,
    /// The text (may hold several lines).
    pub text: String,
}

impl Notice {
    /// A notice.
    pub fn new(level: Level, text: impl Into<String>) -> Notice {
        Notice {
            level,
            text: text.into(),
        }
    }
}

/// One block of the conversation pane.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A turn.
    Turn(Turn),
    /// A notice.
    Notice(Notice),
}

/// Where the program is.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// The plan does not fit; waiting for the person to take the nearest
    /// plan (when there is one) or quit.
    Refused {
        /// Why.
        reason: String,
        /// The nearest plan that fits, described.
        nearest: Option<String>,
    },
    /// Loading the model (0.0…1.0).
    Loading(f32),
    /// Ready for a message.
    Idle,
    /// A reply is streaming.
    Streaming,
    /// The chat cannot go on (the model did not load, its chat template
    /// cannot be used, the model thread stopped): what, in a few words for
    /// the status bar; the notice above says why. Only quitting is left.
    Failed(&'static str),
}

/// Tokens in the context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextUse {
    /// Tokens held now.
    pub used: usize,
    /// Context size (the plan's until the model is loaded, then llama.cpp's).
    pub n_ctx: u32,
}

impl ContextUse {
    /// Fill, 0.0…1.0.
    #[must_use]
    pub fn fill(self) -> f64 {
        if self.n_ctx == 0 {
            0.0
        } else {
            (self.used as f64 / f64::from(self.n_ctx)).min(1.0)
        }
    }
}

/// Sent messages, for Up/Down.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Oldest first.
    pub items: Vec<String>,
    /// The item shown while browsing.
    pub at: Option<usize>,
    /// What was in the input before browsing started.
    pub draft: String,
}

/// Rendered lines of one entry, for one width.
#[derive(Debug, Clone)]
pub struct CachedLines {
    /// What they were rendered from.
    pub key: (usize, u16, u64),
    /// The lines.
    pub lines: Rc<Vec<Line<'static>>>,
}

/// The whole screen state.
#[derive(Debug)]
pub struct App {
    /// Where the program is.
    pub mode: Mode,
    /// What the plan said.
    pub plan: PlanInfo,
    /// The conversation pane.
    pub entries: Vec<Entry>,
    /// The system prompt.
    pub system: Option<String>,
    /// The input box.
    pub input: TextArea<'static>,
    /// Sent messages.
    pub history: History,
    /// Top line of the conversation when scrolled; `None` follows the end.
    pub scroll: Option<usize>,
    /// Terminal size (columns, rows).
    pub size: (u16, u16),
    /// Memory in use.
    pub usage: Usage,
    /// Context in use.
    pub ctx: ContextUse,
    /// Decode speed of the last finished reply.
    pub last_tps: Option<f64>,
    /// Decode speed of the reply streaming now.
    pub live_tps: Option<f64>,
    /// The help overlay is open.
    pub help: bool,
    /// Styles.
    pub theme: Theme,
    /// A message typed while the model was loading, sent once it is loaded.
    pub pending: Option<String>,
    /// The chat template in use (after the load).
    pub template: Option<String>,
    /// Tokens kept free for the reply when the prompt is trimmed.
    pub reserve: usize,
    /// Set when the program should end.
    pub quit: bool,
    /// The context-nearly-full notice was shown (reset when turns are dropped).
    pub ctx_warned: bool,
    /// Rendered lines per entry (an entry's text only grows or is replaced).
    pub cache: RefCell<Vec<Option<CachedLines>>>,
}

impl App {
    /// A new chat for this plan, loading (or refused, see [`Mode`]).
    #[must_use]
    pub fn new(plan: PlanInfo, mode: Mode, size: (u16, u16), theme: Theme) -> App {
        let mut entries: Vec<Entry> = plan.banner().into_iter().map(Entry::Notice).collect();
        if let Mode::Refused { reason, nearest } = &mode {
            entries.push(Entry::Notice(Notice::new(
                Level::Error,
                format!("refused: does not fit: {reason}"),
            )));
            entries.push(Entry::Notice(match nearest {
                Some(n) => Notice::new(
                    Level::Info,
                    format!("nearest plan that fits: {n}\nEnter starts it; q or Esc quits"),
                ),
                None => Notice::new(Level::Info, "q or Esc quits"),
            }));
        }
        let ctx = ContextUse {
            used: 0,
            n_ctx: plan.n_ctx,
        };
        App {
            mode,
            plan,
            entries,
            system: None,
            input: new_input(theme),
            history: History::default(),
            scroll: None,
            size,
            usage: Usage::default(),
            ctx,
            last_tps: None,
            live_tps: None,
            help: false,
            theme,
            pending: None,
            template: None,
            reserve: 512,
            quit: false,
            ctx_warned: false,
            cache: RefCell::new(Vec::new()),
        }
    }

    /// Add a notice at the end of the conversation.
    pub fn notice(&mut self, level: Level, text: impl Into<String>) {
        self.entries.push(Entry::Notice(Notice::new(level, text)));
    }

    /// The turns sent to the model: the system prompt, then every turn still
    /// in the context, in order.
    #[must_use]
    pub fn messages(&self) -> Vec<Message> {
        let mut out: Vec<Message> = self
            .system
            .iter()
            .map(|s| Message::system(s.clone()))
            .collect();
        for e in &self.entries {
            if let Entry::Turn(t) = e
                && t.in_context
            {
                out.push(match t.role {
                    Role::User => Message::user(t.text.clone()),
                    Role::Assistant => Message::assistant(t.text.clone()),
                });
            }
        }
        out
    }

    /// The turns, in order.
    pub fn turns(&self) -> impl Iterator<Item = &Turn> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Turn(t) => Some(t),
            Entry::Notice(_) => None,
        })
    }

    /// The reply being written, if any.
    pub fn streaming_turn(&mut self) -> Option<&mut Turn> {
        self.entries.iter_mut().rev().find_map(|e| match e {
            Entry::Turn(t) if t.state == TurnState::Streaming => Some(t),
            _ => None,
        })
    }

    /// The text in the input box.
    #[must_use]
    pub fn input_text(&self) -> String {
        self.input.lines().join("\n")
    }

    /// Replace the input box's text (cursor at the end).
    pub fn set_input(&mut self, text: &str) {
        self.input = new_input(self.theme);
        self.input.insert_str(text);
    }

    /// Whether a message can be sent now.
    #[must_use]
    pub fn can_send(&self) -> bool {
        self.mode == Mode::Idle
    }
}

/// The state a finished generation leaves its turn in.
#[must_use]
pub fn state_after(reason: StopReason) -> TurnState {
    match reason {
        StopReason::Interrupted => TurnState::Stopped,
        StopReason::ContextFull => TurnState::ContextFull,
        StopReason::EndOfGeneration | StopReason::StopString | StopReason::MaxTokens => {
            TurnState::Done
        }
    }
}

fn new_input(theme: Theme) -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_cursor_line_style(Style::new());
    t.set_wrap_mode(WrapMode::WordOrGlyph);
    t.set_placeholder_text("Type a message");
    t.set_placeholder_style(theme.dim());
    t
}

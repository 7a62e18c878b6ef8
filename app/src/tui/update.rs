//! How each event changes the chat's state, and what it asks the main loop to
//! do ([`Effect`]). No I/O here: saving, loading and the model thread are the
//! main loop's, so every rule below can be tested with plain values.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The status bar's words, and the notice's start, when the model did not load.
const FAILED_LOAD: &str = "the model could not be loaded";

use super::event::{Effect, Event, ModelEvent, Request};
use super::state::{App, CONTEXT_WARN, Entry, Mode, Role, Turn, TurnState, state_after};
use super::theme::Level;
use super::view;

impl App {
    /// Apply one event.
    pub fn update(&mut self, event: Event) -> Vec<Effect> {
        match event {
            Event::Key(k, _) => self.on_key(k),
            Event::Paste(text) => {
                if self.accepts_input() {
                    self.input
                        .insert_str(text.replace("\r\n", "\n").replace('\r', "\n"));
                }
                Vec::new()
            }
            Event::Scroll(lines) => {
                self.scroll_by(isize::from(lines));
                Vec::new()
            }
            Event::Resize(w, h) => {
                self.size = (w, h);
                Vec::new()
            }
            Event::Usage(u) => {
                self.usage = u;
                Vec::new()
            }
            Event::InputLost(why) => {
                tracing::warn!("{why}; ending the chat");
                vec![Effect::Quit]
            }
            Event::Model(m) => self.on_model(m),
        }
    }

    fn accepts_input(&self) -> bool {
        matches!(
            self.mode,
            Mode::Idle | Mode::Streaming | Mode::Loading(_) | Mode::Failed(_)
        )
    }

    fn on_key(&mut self, k: KeyEvent) -> Vec<Effect> {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let newline_mod = k
            .modifiers
            .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT);
        if self.help {
            self.help = false;
            return Vec::new();
        }
        if let Mode::Refused { nearest, .. } = &self.mode {
            return match k.code {
                KeyCode::Enter if nearest.is_some() => vec![Effect::AcceptNearest],
                KeyCode::Esc | KeyCode::Char('q') => vec![Effect::Quit],
                KeyCode::Char('c' | 'd') if ctrl => vec![Effect::Quit],
                _ => Vec::new(),
            };
        }
        let streaming = self.mode == Mode::Streaming;
        match k.code {
            KeyCode::Char('c') if ctrl => {
                if streaming {
                    vec![Effect::Stop]
                } else {
                    vec![Effect::Quit]
                }
            }
            KeyCode::Char('d') if ctrl => vec![Effect::Quit],
            KeyCode::Esc => {
                if streaming {
                    vec![Effect::Stop]
                } else {
                    self.scroll = None;
                    Vec::new()
                }
            }
            KeyCode::Enter if newline_mod => self.newline(),
            KeyCode::Char('j') if ctrl => self.newline(),
            KeyCode::Enter => self.submit(),
            KeyCode::PageUp => {
                self.scroll_by(-self.page());
                Vec::new()
            }
            KeyCode::PageDown => {
                self.scroll_by(self.page());
                Vec::new()
            }
            KeyCode::Home if ctrl || self.input.is_empty() => {
                self.scroll = Some(0);
                self.scroll_by(0);
                Vec::new()
            }
            KeyCode::End if ctrl || self.input.is_empty() => {
                self.scroll = None;
                Vec::new()
            }
            KeyCode::Up if self.input.cursor().0 == 0 && self.history_prev() => Vec::new(),
            KeyCode::Down
                if self.input.cursor().0 + 1 >= self.input.lines().len() && self.history_next() =>
            {
                Vec::new()
            }
            _ => {
                if self.accepts_input() {
                    self.input.input(k);
                }
                Vec::new()
            }
        }
    }

    fn newline(&mut self) -> Vec<Effect> {
        if self.accepts_input() {
            self.input.insert_newline();
        }
        Vec::new()
    }

    fn page(&self) -> isize {
        let (_, height) = view::transcript_metrics(self);
        isize::try_from(height.saturating_sub(1).max(1)).unwrap_or(1)
    }

    /// Scroll the conversation by `delta` lines (negative: up); reaching the
    /// end follows new text again.
    pub fn scroll_by(&mut self, delta: isize) {
        let (total, height) = view::transcript_metrics(self);
        let max_top = total.saturating_sub(height);
        let top = self.scroll.unwrap_or(max_top);
        let top = top.saturating_add_signed(delta).min(max_top);
        self.scroll = (top < max_top).then_some(top);
    }

    fn history_prev(&mut self) -> bool {
        let n = self.history.items.len();
        if n == 0 {
            return false;
        }
        let i = match self.history.at {
            None => {
                self.history.draft = self.input_text();
                n - 1
            }
            Some(i) => i.saturating_sub(1),
        };
        self.history.at = Some(i);
        let text = self.history.items[i].clone();
        self.set_input(&text);
        true
    }

    fn history_next(&mut self) -> bool {
        let Some(i) = self.history.at else {
            return false;
        };
        if i + 1 < self.history.items.len() {
            self.history.at = Some(i + 1);
            let text = self.history.items[i + 1].clone();
            self.set_input(&text);
        } else {
            self.history.at = None;
            let draft = std::mem::take(&mut self.history.draft);
            self.set_input(&draft);
        }
        true
    }

    fn remember(&mut self, text: &str) {
        if self.history.items.last().is_none_or(|l| l != text) {
            self.history.items.push(text.to_string());
        }
        self.history.at = None;
        self.history.draft.clear();
    }

    fn submit(&mut self) -> Vec<Effect> {
        let text = self.input_text();
        if text.trim().is_empty() {
            return Vec::new();
        }
        if let Some(cmd) = text.strip_prefix('/')
            && !cmd.starts_with('/')
        {
            let cmd = cmd.trim().to_string();
            self.remember(&text);
            self.set_input("");
            return self.command(&cmd);
        }
        // `//text` sends `/text`.
        let message = text.strip_prefix('/').unwrap_or(&text).to_string();
        match self.mode {
            Mode::Idle => {
                self.remember(&text);
                self.set_input("");
                self.send(message)
            }
            Mode::Loading(_) => {
                self.remember(&text);
                self.set_input("");
                self.pending = Some(message);
                self.notice(
                    Level::Info,
                    "the model is loading: the message is sent when it is ready",
                );
                Vec::new()
            }
            Mode::Streaming => {
                self.notice(
                    Level::Warn,
                    "a reply is streaming: Esc stops it, then Enter sends",
                );
                Vec::new()
            }
            Mode::Failed(_) => {
                self.notice(
                    Level::Error,
                    "no model to answer: /save keeps the conversation, /quit leaves",
                );
                Vec::new()
            }
            Mode::Refused { .. } => Vec::new(),
        }
    }

    /// Add the user's turn and ask the model for a reply.
    fn send(&mut self, text: String) -> Vec<Effect> {
        self.entries.push(Entry::Turn(Turn {
            role: Role::User,
            text,
            state: TurnState::Done,
            in_context: true,
        }));
        let messages = self.messages();
        self.entries.push(Entry::Turn(Turn {
            role: Role::Assistant,
            text: String::new(),
            state: TurnState::Streaming,
            in_context: true,
        }));
        self.mode = Mode::Streaming;
        self.scroll = None;
        self.live_tps = None;
        vec![Effect::Request(Request::Generate {
            messages,
            reserve: self.reserve,
        })]
    }

    fn on_model(&mut self, m: ModelEvent) -> Vec<Effect> {
        match m {
            ModelEvent::Progress(p) => {
                if matches!(self.mode, Mode::Loading(_)) {
                    self.mode = Mode::Loading(p.clamp(0.0, 1.0));
                }
            }
            ModelEvent::Loaded {
                n_ctx,
                template,
                load_s,
            } => {
                self.mode = Mode::Idle;
                self.ctx.n_ctx = n_ctx;
                self.reserve = self.reserve.min(n_ctx as usize / 2);
                self.notice(
                    Level::Info,
                    format!("loaded in {load_s:.1} s · context {n_ctx} tokens · chat template: {template}"),
                );
                self.template = Some(template);
                if let Some(text) = self.pending.take() {
                    return self.send(text);
                }
            }
            ModelEvent::LoadFailed(e) => {
                self.mode = Mode::Failed(FAILED_LOAD);
                self.notice(Level::Error, format!("{FAILED_LOAD}: {e}"));
                self.notice(Level::Info, "Ctrl+C, Ctrl+D or /quit leaves");
            }
            ModelEvent::TemplateFailed(e) => {
                self.mode = Mode::Failed("the chat template cannot be used");
                self.notice(Level::Error, e);
                self.notice(Level::Info, "Ctrl+C, Ctrl+D or /quit leaves");
            }
            ModelEvent::Trimmed(n) => {
                let mut left = n;
                for e in &mut self.entries {
                    if left == 0 {
                        break;
                    }
                    if let Entry::Turn(t) = e
                        && t.in_context
                        && t.state != TurnState::Streaming
                    {
                        t.in_context = false;
                        left -= 1;
                    }
                }
                self.ctx_warned = false;
                let kept = if self.system.is_some() {
                    " (the system prompt is kept)"
                } else {
                    ""
                };
                self.notice(
                    Level::Warn,
                    format!(
                        "context full: the {n} oldest messages were dropped from the context{kept}"
                    ),
                );
            }
            ModelEvent::Text {
                text,
                ctx_used,
                tokens_per_s,
            } => {
                if let Some(t) = self.streaming_turn() {
                    t.text.push_str(&text);
                }
                self.ctx.used = ctx_used;
                self.live_tps = Some(tokens_per_s);
            }
            ModelEvent::Done {
                reason,
                ctx_used,
                tokens,
                tokens_per_s,
            } => {
                if let Some(t) = self.streaming_turn() {
                    t.state = state_after(reason);
                }
                self.mode = Mode::Idle;
                self.ctx.used = ctx_used;
                self.live_tps = None;
                if tokens > 0 {
                    self.last_tps = Some(tokens_per_s);
                }
                if reason == crate::runner::StopReason::ContextFull {
                    self.notice(
                        Level::Warn,
                        "context full: the reply was cut; the next message drops the oldest turns",
                    );
                    self.ctx_warned = true;
                } else if self.ctx.fill() >= CONTEXT_WARN && !self.ctx_warned {
                    self.ctx_warned = true;
                    self.notice(
                        Level::Warn,
                        format!(
                            "context {:.0}% full: when it fills, the oldest turns are dropped",
                            self.ctx.fill() * 100.0
                        ),
                    );
                }
            }
            ModelEvent::Failed(e) => {
                if let Some(t) = self.streaming_turn() {
                    t.state = TurnState::Failed;
                }
                self.mode = Mode::Idle;
                self.live_tps = None;
                self.notice(Level::Error, e);
            }
            ModelEvent::Cleared => self.ctx.used = 0,
            ModelEvent::Crashed(what) => {
                if let Some(t) = self.streaming_turn() {
                    t.state = TurnState::Failed;
                }
                self.mode = Mode::Failed("the model thread stopped");
                self.live_tps = None;
                self.notice(
                    Level::Error,
                    format!("the model thread stopped: {what}; /save keeps the conversation, /quit leaves"),
                );
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Instant;

    use super::*;
    use crate::runner::StopReason;
    use crate::tui::state::PlanInfo;
    use crate::tui::theme::Theme;

    pub(crate) fn plan() -> PlanInfo {
        PlanInfo {
            model: "tiny".into(),
            quant: "Q4_K_M".into(),
            n_ctx: 1000,
            n_gpu_layers: 0,
            ram_budget: 8 << 30,
            ram_planned: 500 << 20,
            gpus: Vec::new(),
            est_decode_tps: 50.0,
            summary: "fits".into(),
            warnings: Vec::new(),
        }
    }

    pub(crate) fn key(code: KeyCode, m: KeyModifiers) -> Event {
        Event::Key(KeyEvent::new(code, m), Instant::now())
    }

    pub(crate) fn typed(app: &mut App, s: &str) {
        for c in s.chars() {
            app.update(key(KeyCode::Char(c), KeyModifiers::NONE));
        }
    }

    pub(crate) fn ready() -> App {
        let mut app = App::new(plan(), Mode::Loading(0.0), (80, 24), Theme::new(false));
        app.update(Event::Model(ModelEvent::Loaded {
            n_ctx: 1000,
            template: "gemma".into(),
            load_s: 0.5,
        }));
        app
    }

    pub(crate) fn enter(app: &mut App) -> Vec<Effect> {
        app.update(key(KeyCode::Enter, KeyModifiers::NONE))
    }

    #[test]
    fn enter_sends_and_the_reply_streams_into_its_turn() {
        let mut app = ready();
        app.system = Some("be brief".into());
        typed(&mut app, "hi");
        let fx = enter(&mut app);
        let Some(Effect::Request(Request::Generate { messages, .. })) = fx.first() else {
            panic!("no request: {fx:?}")
        };
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[1].content, "hi");
        assert_eq!(app.mode, Mode::Streaming);
        assert!(app.input.is_empty());
        app.update(Event::Model(ModelEvent::Text {
            text: "Hel".into(),
            ctx_used: 10,
            tokens_per_s: 5.0,
        }));
        app.update(Event::Model(ModelEvent::Text {
            text: "lo".into(),
            ctx_used: 11,
            tokens_per_s: 6.0,
        }));
        // Esc stops; the reply keeps what it had.
        assert_eq!(
            app.update(key(KeyCode::Esc, KeyModifiers::NONE)),
            vec![Effect::Stop]
        );
        app.update(Event::Model(ModelEvent::Done {
            reason: StopReason::Interrupted,
            ctx_used: 11,
            tokens: 2,
            tokens_per_s: 6.0,
        }));
        let last = app.turns().last().cloned().expect("a turn");
        assert_eq!(
            (last.text.as_str(), last.state),
            ("Hello", TurnState::Stopped)
        );
        assert_eq!(app.mode, Mode::Idle);
        assert_eq!(app.last_tps, Some(6.0));
        // The next request carries the stopped reply, so roles alternate.
        typed(&mut app, "more");
        let fx = enter(&mut app);
        let Some(Effect::Request(Request::Generate { messages, .. })) = fx.first() else {
            panic!("no request")
        };
        let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
    }

    #[test]
    fn new_lines_history_and_quitting() {
        let mut app = ready();
        typed(&mut app, "a");
        app.update(key(KeyCode::Enter, KeyModifiers::ALT));
        typed(&mut app, "b");
        assert_eq!(app.input_text(), "a\nb");
        enter(&mut app);
        app.update(Event::Model(ModelEvent::Done {
            reason: StopReason::EndOfGeneration,
            ctx_used: 5,
            tokens: 0,
            tokens_per_s: 0.0,
        }));
        typed(&mut app, "draft");
        app.update(key(KeyCode::Up, KeyModifiers::NONE));
        assert_eq!(app.input_text(), "a\nb");
        app.update(key(KeyCode::Down, KeyModifiers::NONE));
        app.update(key(KeyCode::Down, KeyModifiers::NONE));
        assert_eq!(app.input_text(), "draft");
        // Ctrl+C on an idle prompt quits; so does /quit.
        assert_eq!(
            app.update(key(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            vec![Effect::Quit]
        );
        app.set_input("/quit");
        assert_eq!(enter(&mut app), vec![Effect::Quit]);
    }

    #[test]
    fn trimming_marks_the_oldest_turns_and_keeps_the_new_one() {
        let mut app = ready();
        for text in ["one", "two"] {
            typed(&mut app, text);
            enter(&mut app);
            app.update(Event::Model(ModelEvent::Done {
                reason: StopReason::EndOfGeneration,
                ctx_used: 900,
                tokens: 3,
                tokens_per_s: 1.0,
            }));
        }
        let warned = app
            .entries
            .iter()
            .any(|e| matches!(e, Entry::Notice(n) if n.text.contains("90% full")));
        assert!(warned, "nearly full is announced");
        typed(&mut app, "three");
        enter(&mut app);
        app.update(Event::Model(ModelEvent::Trimmed(2)));
        let flags: Vec<bool> = app.turns().map(|t| t.in_context).collect();
        assert_eq!(flags, [false, false, true, true, true, true]);
        let texts: Vec<String> = app.messages().into_iter().map(|m| m.content).collect();
        assert_eq!(texts, ["two", "", "three", ""]);
    }

    #[test]
    fn a_message_typed_while_loading_is_sent_once_loaded() {
        let mut app = App::new(plan(), Mode::Loading(0.1), (80, 24), Theme::new(false));
        typed(&mut app, "early");
        assert!(enter(&mut app).is_empty());
        let fx = app.update(Event::Model(ModelEvent::Loaded {
            n_ctx: 1000,
            template: "gemma".into(),
            load_s: 0.1,
        }));
        assert!(matches!(
            fx.first(),
            Some(Effect::Request(Request::Generate { .. }))
        ));
        assert_eq!(app.mode, Mode::Streaming);
    }

    #[test]
    fn a_refused_plan_offers_the_nearest_one() {
        let mode = Mode::Refused {
            reason: "too big".into(),
            nearest: Some("-c 2048".into()),
        };
        let mut app = App::new(plan(), mode, (80, 24), Theme::new(false));
        assert_eq!(enter(&mut app), vec![Effect::AcceptNearest]);
        assert_eq!(
            app.update(key(KeyCode::Char('q'), KeyModifiers::NONE)),
            vec![Effect::Quit]
        );
    }
}

//! The slash commands typed in the input box: `/help`, `/quit`, `/clear`,
//! `/system`, `/save`, `/load`, `/plan`. Like the rest of the update they
//! change state and return effects; the files are read and written by the
//! main loop.

use headroom_planner::hw::format_size;

use super::event::{Effect, Request};
use super::state::{App, Mode};
use super::theme::Level;

impl App {
    /// Carry out a slash command (`cmd` is what follows the slash).
    pub(super) fn command(&mut self, cmd: &str) -> Vec<Effect> {
        let (name, arg) = match cmd.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim()),
            None => (cmd, ""),
        };
        let busy = self.mode == Mode::Streaming;
        match name {
            "help" | "?" => self.help = true,
            "quit" | "exit" | "q" => return vec![Effect::Quit],
            "clear" if busy => self.notice(Level::Warn, "a reply is streaming: Esc stops it first"),
            "clear" => {
                self.entries.clear();
                self.scroll = None;
                self.ctx_warned = false;
                self.notice(
                    Level::Info,
                    "conversation cleared (the system prompt is kept)",
                );
                if self.mode == Mode::Idle {
                    return vec![Effect::Request(Request::Clear)];
                }
            }
            "system" if arg.is_empty() => match &self.system {
                Some(s) => self.notice(Level::Info, format!("system prompt: {s}")),
                None => self.notice(Level::Info, "no system prompt; /system TEXT sets one"),
            },
            "system" => {
                self.system = Some(arg.to_string());
                self.notice(
                    Level::Info,
                    "system prompt set; it applies from the next message",
                );
            }
            "save" | "load" if arg.is_empty() => {
                self.notice(Level::Error, format!("usage: /{name} FILE.md or FILE.json"));
            }
            "save" => return vec![Effect::Save(arg.into())],
            "load" if busy => self.notice(Level::Warn, "a reply is streaming: Esc stops it first"),
            "load" => return vec![Effect::Load(arg.into())],
            "plan" => {
                let report = self.plan_report();
                self.notice(Level::Info, report);
            }
            _ => self.notice(
                Level::Error,
                format!("unknown command /{name}; /help lists the commands"),
            ),
        }
        Vec::new()
    }

    /// The plan next to what is used now (`/plan`).
    #[must_use]
    pub fn plan_report(&self) -> String {
        let p = &self.plan;
        let mut lines = vec![
            format!("plan     {}", p.summary),
            format!(
                "RAM      planned peak {} · now {} · peak {} · budget {}",
                format_size(p.ram_planned),
                format_size(self.usage.rss),
                format_size(self.usage.peak.max(self.usage.rss)),
                format_size(p.ram_budget)
            ),
        ];
        for (i, g) in p.gpus.iter().enumerate() {
            let now = self
                .usage
                .vram
                .get(i)
                .map_or_else(|| "?".to_string(), |b| format_size(*b));
            lines.push(format!(
                "GPU {i}    {} · planned {} · held by the chat {now} · budget {}",
                g.name,
                format_size(g.planned),
                format_size(g.budget)
            ));
        }
        lines.push(format!(
            "context  {} of {} tokens used ({:.0}%)",
            self.ctx.used,
            self.ctx.n_ctx,
            self.ctx.fill() * 100.0
        ));
        lines.push(match self.last_tps {
            Some(t) => format!(
                "speed    est. {:.1} tok/s · last reply {t:.1} tok/s",
                p.est_decode_tps
            ),
            None => format!("speed    est. {:.1} tok/s · no reply yet", p.est_decode_tps),
        });
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyCode, KeyModifiers};

    use super::super::update::tests::{enter, key, ready};
    use super::*;
    use crate::tui::state::{Entry, Usage};

    #[test]
    fn commands() {
        let mut app = ready();
        app.set_input("/save out.json");
        assert_eq!(enter(&mut app), vec![Effect::Save("out.json".into())]);
        app.set_input("/system You are terse.");
        enter(&mut app);
        assert_eq!(app.system.as_deref(), Some("You are terse."));
        app.set_input("/help");
        enter(&mut app);
        assert!(app.help);
        app.update(key(KeyCode::Char('x'), KeyModifiers::NONE));
        assert!(!app.help, "any key closes help");
        app.usage = Usage {
            rss: 300 << 20,
            peak: 400 << 20,
            vram: Vec::new(),
        };
        app.set_input("/plan");
        enter(&mut app);
        let Some(Entry::Notice(n)) = app.entries.last() else {
            panic!("no notice")
        };
        assert!(
            n.text.contains("planned peak 500.00 MiB") && n.text.contains("peak 400.00 MiB"),
            "{}",
            n.text
        );
        app.set_input("/frobnicate");
        enter(&mut app);
        let Some(Entry::Notice(n)) = app.entries.last() else {
            panic!("no notice")
        };
        assert_eq!(n.level, Level::Error);
        app.set_input("/clear");
        assert_eq!(enter(&mut app), vec![Effect::Request(Request::Clear)]);
        assert_eq!(app.turns().count(), 0);
    }
}

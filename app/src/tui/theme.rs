//! Styles for the chat screen, and `NO_COLOR`: without colour every
//! distinction the screen makes (who is speaking, warnings, the gauge) is still
//! carried by text and by bold, dim or reversed cells.

use ratatui::style::{Color, Modifier, Style};

/// How serious a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Plain information (the banner, "saved").
    Info,
    /// Something to act on (offload, context nearly full).
    Warn,
    /// Something failed.
    Error,
}

/// The chat's styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    color: bool,
}

impl Theme {
    /// Colours unless `NO_COLOR` is set to a non-empty value (no-color.org).
    #[must_use]
    pub fn from_env() -> Theme {
        Theme::new(std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()))
    }

    /// With or without colours.
    #[must_use]
    pub fn new(color: bool) -> Theme {
        Theme { color }
    }

    /// Whether colours are used.
    #[must_use]
    pub fn color(self) -> bool {
        self.color
    }

    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    /// The "You" header.
    #[must_use]
    pub fn user(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    /// The model's header.
    #[must_use]
    pub fn assistant(self) -> Style {
        self.fg(Color::Green).add_modifier(Modifier::BOLD)
    }

    /// Text that matters less: turns dropped from the context, fences, hints.
    #[must_use]
    pub fn dim(self) -> Style {
        Style::new().add_modifier(Modifier::DIM)
    }

    /// Code (inline and blocks).
    #[must_use]
    pub fn code(self) -> Style {
        self.fg(Color::Yellow)
    }

    /// A notice of this level.
    #[must_use]
    pub fn notice(self, level: Level) -> Style {
        match level {
            Level::Info => self.fg(Color::Blue),
            Level::Warn => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            Level::Error => self.fg(Color::Red).add_modifier(Modifier::BOLD),
        }
    }

    /// The status bar's background.
    #[must_use]
    pub fn bar(self) -> Style {
        if self.color {
            Style::new().bg(Color::DarkGray).fg(Color::White)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }

    /// A gauge's filled part at this fill (0.0…1.0): green, then yellow from
    /// `warn`, red when full.
    #[must_use]
    pub fn gauge(self, fill: f64, warn: f64) -> Style {
        let base = self.bar();
        if !self.color {
            return if fill >= warn {
                base.add_modifier(Modifier::BOLD)
            } else {
                base
            };
        }
        let c = if fill >= 0.98 {
            Color::LightRed
        } else if fill >= warn {
            Color::LightYellow
        } else {
            Color::LightGreen
        };
        base.fg(c)
    }

    /// The text cursor drawn at the end of a streaming reply.
    #[must_use]
    pub fn streaming_cursor(self) -> Style {
        self.fg(Color::Green).add_modifier(Modifier::SLOW_BLINK)
    }
}

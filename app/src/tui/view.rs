//! Drawing the chat: the conversation pane, the input box and the two-line
//! status bar (memory against the budget, context gauge, speed, model), plus
//! the help overlay. A pure function of [`App`]: what is drawn for a state is
//! what the snapshot tests see.

use std::hash::{Hash, Hasher};
use std::rc::Rc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Padding, Paragraph};

use super::markdown::{self, width};
use super::state::{App, CONTEXT_WARN, CachedLines, Entry, Mode, Notice, Role, Turn, TurnState};
use super::theme::{Level, Theme};

/// Indent of a turn's text under its header.
const INDENT: usize = 2;
/// Most rows the input box grows to (text lines).
const INPUT_MAX_LINES: usize = 6;

/// Where each part of the screen goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    /// The conversation.
    pub conversation: Rect,
    /// The input box (with its border).
    pub input: Rect,
    /// The status bar.
    pub status: Rect,
}

/// The layout for the app's terminal size.
#[must_use]
pub fn areas(app: &App) -> Areas {
    let area = Rect::new(0, 0, app.size.0, app.size.1);
    let text_lines = match app.mode {
        Mode::Refused { .. } => 1,
        _ => app.input.lines().len().clamp(1, INPUT_MAX_LINES),
    };
    let input_h = u16::try_from(text_lines + 2).unwrap_or(3);
    let [conversation, input, status] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(input_h),
        Constraint::Length(2),
    ])
    .areas(area);
    Areas {
        conversation,
        input,
        status,
    }
}

/// Lines in the whole conversation and rows in its pane, at the current size.
#[must_use]
pub fn transcript_metrics(app: &App) -> (usize, usize) {
    let a = areas(app).conversation;
    let total = (0..app.entries.len())
        .map(|i| entry_lines(app, i, a.width).len())
        .sum();
    (total, usize::from(a.height))
}

/// Draw the whole screen.
pub fn render(app: &App, frame: &mut Frame) {
    let a = areas(app);
    render_conversation(app, frame, a.conversation);
    render_input(app, frame, a.input);
    render_status(app, frame, a.status);
    if app.help {
        render_help(app.theme, frame, frame.area());
    }
}

fn render_conversation(app: &App, frame: &mut Frame, area: Rect) {
    let (total, height) = transcript_metrics(app);
    let max_top = total.saturating_sub(height);
    let top = app.scroll.unwrap_or(max_top).min(max_top);
    let mut lines: Vec<Line<'static>> = Vec::with_capacity(height);
    let mut at = 0usize;
    for i in 0..app.entries.len() {
        if lines.len() >= height {
            break;
        }
        let entry = entry_lines(app, i, area.width);
        let n = entry.len();
        if at + n <= top {
            at += n;
            continue;
        }
        let skip = top.saturating_sub(at);
        lines.extend(entry.iter().skip(skip).take(height - lines.len()).cloned());
        at += n;
    }
    frame.render_widget(Paragraph::new(lines), area);
    let below = total.saturating_sub(top + height);
    if app.scroll.is_some() && below > 0 && area.height > 0 {
        let text = format!(" ↓ {below} more lines · End follows ");
        let w = u16::try_from(width(&text))
            .unwrap_or(u16::MAX)
            .min(area.width);
        let r = Rect::new(area.right() - w, area.bottom() - 1, w, 1);
        frame.render_widget(Paragraph::new(text).style(app.theme.bar()), r);
    }
}

/// An entry's lines at this width (cached: the conversation is re-rendered
/// every frame while a reply streams, but only the streaming turn changes).
fn entry_lines(app: &App, i: usize, w: u16) -> Rc<Vec<Line<'static>>> {
    let entry = &app.entries[i];
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match entry {
        Entry::Turn(t) => {
            (0u8, &t.text, t.state as u8, t.in_context, t.role as u8).hash(&mut h);
        }
        Entry::Notice(n) => (1u8, &n.text, n.level as u8).hash(&mut h),
    }
    app.plan.model.hash(&mut h);
    let key = (i, w, h.finish());
    let mut cache = app.cache.borrow_mut();
    if cache.len() != app.entries.len() {
        cache.resize(app.entries.len(), None);
    }
    if let Some(c) = &cache[i]
        && c.key == key
    {
        return c.lines.clone();
    }
    let mut lines = if i == 0 {
        Vec::new()
    } else {
        vec![Line::default()]
    };
    match entry {
        Entry::Turn(t) => lines.extend(turn_lines(app, t, usize::from(w))),
        Entry::Notice(n) => lines.extend(notice_lines(app.theme, n, usize::from(w))),
    }
    let lines = Rc::new(lines);
    cache[i] = Some(CachedLines {
        key,
        lines: lines.clone(),
    });
    lines
}

fn turn_lines(app: &App, t: &Turn, w: usize) -> Vec<Line<'static>> {
    let theme = app.theme;
    let (name, style) = match t.role {
        Role::User => ("You".to_string(), theme.user()),
        Role::Assistant => (app.plan.model.clone(), theme.assistant()),
    };
    let mut header = vec![Span::styled(name, style)];
    if !t.in_context {
        header.push(Span::styled(" · dropped from the context", theme.dim()));
    }
    let mut lines = vec![Line::from(header)];
    let base = if t.in_context {
        Style::new()
    } else {
        theme.dim()
    };
    let pad = " ".repeat(INDENT);
    let avail = w.saturating_sub(INDENT).max(1);
    match t.role {
        Role::User => {
            for l in t.text.split('\n') {
                lines.extend(markdown::wrap(
                    vec![Span::styled(l.to_string(), base)],
                    avail,
                    &pad,
                    &pad,
                    true,
                ));
            }
        }
        Role::Assistant if !t.text.is_empty() => {
            lines.extend(markdown::render(&t.text, w, INDENT, theme, base));
        }
        Role::Assistant => {}
    }
    let footer = match t.state {
        TurnState::Streaming => {
            let cursor = Span::styled("▌", theme.streaming_cursor());
            let n = lines.len();
            match lines.last_mut() {
                Some(last) if n > 1 && last.width() < w => last.spans.push(cursor),
                _ => lines.push(Line::from(vec![Span::raw(pad.clone()), cursor])),
            }
            None
        }
        TurnState::Done => None,
        TurnState::Stopped => Some("[stopped]"),
        TurnState::ContextFull => Some("[cut: the context is full]"),
        TurnState::Failed => Some("[failed]"),
    };
    if let Some(f) = footer {
        lines.push(Line::from(vec![
            Span::raw(pad),
            Span::styled(f, theme.dim()),
        ]));
    }
    lines
}

fn notice_lines(theme: Theme, n: &Notice, w: usize) -> Vec<Line<'static>> {
    let marker = match n.level {
        Level::Info => "· ",
        Level::Warn => "! ",
        Level::Error => "✗ ",
    };
    let style = theme.notice(n.level);
    let mut out = Vec::new();
    for (i, l) in n.text.split('\n').enumerate() {
        let first = if i == 0 { marker } else { "  " };
        out.extend(markdown::wrap(
            vec![Span::styled(l.to_string(), style)],
            w.saturating_sub(2).max(1),
            first,
            "  ",
            true,
        ));
    }
    out
}

fn render_input(app: &App, frame: &mut Frame, area: Rect) {
    let theme = app.theme;
    let block = Block::new()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(theme.dim());
    let hint = match &app.mode {
        Mode::Refused { .. } => "",
        Mode::Failed(_) => " Ctrl+C, Ctrl+D or /quit leaves ",
        Mode::Streaming => " streaming · Esc stops ",
        Mode::Loading(_) => " loading · Enter queues the message ",
        Mode::Idle if app.scroll.is_some() => " PgUp/PgDn scroll · End follows ",
        Mode::Idle => " Enter sends · Alt+Enter new line · /help ",
    };
    let block = block.title_bottom(Line::from(Span::styled(hint, theme.dim())).right_aligned());
    if let Mode::Refused { nearest, .. } = &app.mode {
        let text = match nearest {
            Some(_) => "Enter starts the nearest plan that fits (above) · q or Esc quits",
            None => "nothing nearby fits · q or Esc quits",
        };
        let p = Paragraph::new(Line::from(Span::styled(text, theme.notice(Level::Error))))
            .block(block.padding(Padding::horizontal(1)));
        frame.render_widget(p, area);
        return;
    }
    let block = block.padding(Padding::horizontal(1));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    frame.render_widget(&app.input, inner);
}

/// Sizes in the status bar: whole MiB under a GiB, else GiB with one decimal.
#[must_use]
pub fn compact_size(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let mib = bytes as f64 / MIB;
    if mib < 1000.0 {
        format!("{mib:.0} MiB")
    } else {
        format!("{:.1} GiB", mib / 1024.0)
    }
}

fn gauge(fill: f64, cells: usize) -> String {
    let full = ((fill.clamp(0.0, 1.0) * cells as f64).round() as usize).min(cells);
    format!("{}{}", "█".repeat(full), "░".repeat(cells - full))
}

fn render_status(app: &App, frame: &mut Frame, area: Rect) {
    let theme = app.theme;
    let bar = theme.bar();
    let sep = Span::styled(" │ ", bar);
    let p = &app.plan;

    // Line 1: memory.
    let mut mem = vec![Span::styled(
        " RAM ",
        bar.add_modifier(ratatui::style::Modifier::BOLD),
    )];
    if app.usage.rss == 0 {
        mem.push(Span::styled(
            format!("… / {}", compact_size(p.ram_budget)),
            bar,
        ));
    } else {
        // VmHWM and statm are read at different moments; the peak is never below now.
        let peak = app.usage.peak.max(app.usage.rss);
        let over = peak > p.ram_planned;
        // Yellow from 90% of the budget, red over it.
        let fill = app.usage.rss as f64 / p.ram_budget.max(1) as f64;
        let rss_style = match fill {
            f if f > 1.0 => theme.gauge(1.0, 0.9),
            f if f >= 0.9 => theme.gauge(0.9, 0.9),
            _ => bar,
        };
        mem.push(Span::styled(
            format!(
                "{} / {}",
                compact_size(app.usage.rss),
                compact_size(p.ram_budget)
            ),
            rss_style,
        ));
        mem.push(Span::styled(
            format!(
                " · peak {} (plan {})",
                compact_size(peak),
                compact_size(p.ram_planned)
            ),
            // Above the plan is a miss of the prediction: a warning, not danger.
            if over {
                theme.gauge(CONTEXT_WARN, CONTEXT_WARN)
            } else {
                bar
            },
        ));
    }
    for (i, g) in p.gpus.iter().enumerate() {
        mem.push(sep.clone());
        let used = app
            .usage
            .vram
            .get(i)
            .map_or_else(|| "…".to_string(), |b| compact_size(*b));
        let fill = app
            .usage
            .vram
            .get(i)
            .map_or(0.0, |b| *b as f64 / g.budget.max(1) as f64);
        let style = match fill {
            f if f > 1.0 => theme.gauge(1.0, 0.9),
            f if f >= 0.9 => theme.gauge(0.9, 0.9),
            _ => bar,
        };
        mem.push(Span::styled(
            format!("GPU{i} {used} / {}", compact_size(g.budget)),
            style,
        ));
    }
    if p.gpus.is_empty() {
        mem.push(sep.clone());
        mem.push(Span::styled("no GPU", bar));
    }

    // Line 2: context gauge (or load progress), speed, model.
    let mut second = Vec::new();
    match &app.mode {
        Mode::Loading(f) => {
            second.push(Span::styled(
                " loading ",
                bar.add_modifier(ratatui::style::Modifier::BOLD),
            ));
            second.push(Span::styled(
                gauge(f64::from(*f), 16),
                theme.gauge(0.0, 1.0),
            ));
            second.push(Span::styled(format!(" {:3.0}%", f * 100.0), bar));
        }
        Mode::Refused { .. } => {
            second.push(Span::styled(
                " refused: the plan does not fit",
                bar.patch(theme.notice(Level::Error)),
            ));
        }
        Mode::Failed(what) => {
            second.push(Span::styled(
                format!(" {what}"),
                bar.patch(theme.notice(Level::Error)),
            ));
        }
        Mode::Idle | Mode::Streaming => {
            let fill = app.ctx.fill();
            second.push(Span::styled(
                " ctx ",
                bar.add_modifier(ratatui::style::Modifier::BOLD),
            ));
            second.push(Span::styled(
                gauge(fill, 12),
                theme.gauge(fill, CONTEXT_WARN),
            ));
            second.push(Span::styled(
                format!(" {}/{}", app.ctx.used, app.ctx.n_ctx),
                bar,
            ));
            second.push(sep.clone());
            let speed = match (app.live_tps, app.last_tps) {
                (Some(t), _) => format!("{t:.1} tok/s ▸"),
                (None, Some(t)) => format!("{t:.1} tok/s"),
                (None, None) => "– tok/s".to_string(),
            };
            second.push(Span::styled(speed, bar));
        }
    }
    second.push(sep);
    if app.ctx.fill() >= CONTEXT_WARN && matches!(app.mode, Mode::Idle | Mode::Streaming) {
        second.push(Span::styled(
            format!(
                "{:.0}% full · oldest turns drop next",
                app.ctx.fill() * 100.0
            ),
            theme.gauge(app.ctx.fill(), CONTEXT_WARN),
        ));
    } else {
        let model = if p.model.to_lowercase().contains(&p.quant.to_lowercase()) {
            p.model.clone()
        } else {
            format!("{} {}", p.model, p.quant)
        };
        second.push(Span::styled(model, bar));
    }
    let para = Paragraph::new(vec![Line::from(mem), Line::from(second)]).style(bar);
    frame.render_widget(para, area);
}

/// The help text: keys, then commands.
pub const HELP: &[(&str, &str)] = &[
    ("Enter", "send the message"),
    ("Alt+Enter", "new line (also Shift+Enter, Ctrl+J)"),
    ("Up / Down", "earlier messages"),
    ("PgUp / PgDn", "scroll; Home / End when the input is empty"),
    ("Esc, Ctrl+C", "stop the reply"),
    ("Ctrl+C, Ctrl+D", "quit (when no reply is streaming)"),
    ("/clear", "forget the conversation"),
    ("/system TEXT", "set the system prompt"),
    ("/save FILE", "save as Markdown (.md) or JSON (.json)"),
    ("/load FILE", "load a JSON save"),
    ("/plan", "the plan next to what is used now"),
    ("/quit", "quit"),
];

fn render_help(theme: Theme, frame: &mut Frame, area: Rect) {
    let key_w = HELP.iter().map(|(k, _)| width(k)).max().unwrap_or(0);
    let mut lines: Vec<Line<'static>> = HELP
        .iter()
        .map(|(k, v)| {
            Line::from(vec![
                Span::styled(format!(" {k:<key_w$}  "), theme.user()),
                Span::raw((*v).to_string()),
            ])
        })
        .collect();
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        " any key closes this",
        theme.dim(),
    )));
    let h = u16::try_from(lines.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height);
    let w = 66.min(area.width);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    frame.render_widget(Clear, r);
    let block = Block::new()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .title(" headroom chat · help ");
    frame.render_widget(Paragraph::new(lines).block(block), r);
}

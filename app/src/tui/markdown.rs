//! Markdown as the chat shows it: a small renderer for what models write
//! (fenced code, headings, lists, quotes, rules, `code`, **bold**, *italic*),
//! wrapped to the pane's width.
//!
//! A reply is rendered again as it streams, so an unclosed fence or `**` must
//! look sensible: an open fence is code until it closes, an unmatched marker is
//! shown as written. Source line breaks are kept (chat models use them as
//! they mean them), and wrapping is done here rather than by ratatui's
//! `Paragraph`, so the scroll position can be computed from exact heights.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

use super::theme::Theme;

/// Renders `text` into lines at most `width` cells wide, each starting with
/// `indent` spaces. `base` is the style of plain text.
#[must_use]
pub fn render(
    text: &str,
    width: usize,
    indent: usize,
    theme: Theme,
    base: Style,
) -> Vec<Line<'static>> {
    let pad = " ".repeat(indent);
    let avail = width.saturating_sub(indent).max(1);
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    for raw in text.split('\n') {
        let line = raw.trim_end_matches('\r');
        let trimmed = line.trim_start();
        let lead = line.len() - trimmed.len();
        if lead <= 3 && (trimmed.starts_with("```") || trimmed.starts_with("~~~")) {
            let marker = &trimmed[..3];
            match &fence {
                Some(open) if open == marker && trimmed.trim_end() == marker => fence = None,
                Some(_) => {}
                None => fence = Some(marker.to_string()),
            }
            out.extend(wrap(
                vec![Span::styled(trimmed.to_string(), theme.dim())],
                avail,
                &pad,
                &pad,
                false,
            ));
            continue;
        }
        if fence.is_some() {
            let code = line.replace('\t', "    ");
            out.extend(wrap(
                vec![Span::styled(code, theme.code())],
                avail,
                &pad,
                &pad,
                false,
            ));
            continue;
        }
        out.extend(block_line(line, avail, &pad, theme, base));
    }
    out
}

/// One line outside code blocks.
fn block_line(
    line: &str,
    avail: usize,
    pad: &str,
    theme: Theme,
    base: Style,
) -> Vec<Line<'static>> {
    let trimmed = line.trim_start();
    if trimmed.is_empty() {
        return vec![Line::from(pad.to_string())];
    }
    if let Some((level, title)) = heading(trimmed) {
        let mut style = base.add_modifier(Modifier::BOLD);
        if level == 1 {
            style = style.add_modifier(Modifier::UNDERLINED);
        }
        return wrap(inline(title, theme, style), avail, pad, pad, true);
    }
    if is_rule(trimmed) {
        return vec![Line::from(vec![
            Span::raw(pad.to_string()),
            Span::styled("─".repeat(avail), theme.dim()),
        ])];
    }
    if let Some(quoted) = trimmed.strip_prefix('>') {
        let first = format!("{pad}│ ");
        let style = base.add_modifier(Modifier::ITALIC);
        return wrap(
            inline(quoted.trim_start(), theme, style),
            avail.saturating_sub(2).max(1),
            &first,
            &first,
            true,
        );
    }
    if let Some((marker, rest)) = list_item(trimmed) {
        let nest = (line.len() - trimmed.len()).min(avail / 2);
        let first = format!("{pad}{}{marker} ", " ".repeat(nest));
        let hang = " ".repeat(first.chars().count());
        let inner = avail
            .saturating_sub(nest + marker.chars().count() + 1)
            .max(1);
        return wrap(inline(rest, theme, base), inner, &first, &hang, true);
    }
    wrap(inline(line, theme, base), avail, pad, pad, true)
}

fn heading(s: &str) -> Option<(usize, &str)> {
    let level = s.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&level) && s[level..].starts_with(' ') {
        Some((level, s[level..].trim()))
    } else {
        None
    }
}

fn is_rule(s: &str) -> bool {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    s.len() >= 3 && ['-', '*', '_'].iter().any(|&m| s.chars().all(|c| c == m))
}

/// `- x`, `* x`, `+ x` → ("•", "x"); `12. x` → ("12.", "x").
fn list_item(s: &str) -> Option<(String, &str)> {
    for b in ["- ", "* ", "+ "] {
        if let Some(rest) = s.strip_prefix(b) {
            return Some(("•".to_string(), rest));
        }
    }
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    if (1..=3).contains(&digits) {
        let rest = &s[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some((format!("{}.", &s[..digits]), rest));
        }
    }
    None
}

/// Inline markup: `code`, **bold** / __bold__, *italic* / _italic_.
/// Unmatched markers stay as written.
#[must_use]
pub fn inline(s: &str, theme: Theme, base: Style) -> Vec<Span<'static>> {
    let mut out: Vec<Span<'static>> = Vec::new();
    let mut plain = String::new();
    let mut rest = s;
    let flush = |plain: &mut String, out: &mut Vec<Span<'static>>| {
        if !plain.is_empty() {
            out.push(Span::styled(std::mem::take(plain), base));
        }
    };
    while let Some(c) = rest.chars().next() {
        let found = match c {
            '`' => closed(rest, "`").map(|(inner, used)| (inner, used, theme.code())),
            '*' | '_' if rest.len() > 1 && rest[1..].starts_with(c) => {
                let m = if c == '*' { "**" } else { "__" };
                closed(rest, m)
                    .map(|(inner, used)| (inner, used, base.add_modifier(Modifier::BOLD)))
            }
            '*' | '_' if word_start(&plain) => closed(rest, if c == '*' { "*" } else { "_" })
                .map(|(inner, used)| (inner, used, base.add_modifier(Modifier::ITALIC))),
            _ => None,
        };
        match found {
            Some((inner, used, style)) => {
                flush(&mut plain, &mut out);
                out.push(Span::styled(inner.to_string(), style));
                rest = &rest[used..];
            }
            None => {
                plain.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    flush(&mut plain, &mut out);
    out
}

/// Whether an emphasis marker here starts a word (`snake_case` is not italic).
fn word_start(before: &str) -> bool {
    before.chars().last().is_none_or(|c| !c.is_alphanumeric())
}

/// `rest` starts with `marker`: the text up to the closing marker (non-empty,
/// not starting or ending with a space) and the bytes used.
fn closed<'a>(rest: &'a str, marker: &str) -> Option<(&'a str, usize)> {
    let body = &rest[marker.len()..];
    let end = body.find(marker)?;
    let inner = &body[..end];
    if inner.is_empty() || (marker != "`" && (inner.starts_with(' ') || inner.ends_with(' '))) {
        return None;
    }
    Some((inner, marker.len() + end + marker.len()))
}

/// Display width of a string in terminal cells.
#[must_use]
pub fn width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// Wraps styled text to `avail` cells: the first line starts with `first`,
/// later ones with `rest` (hanging indent). With `words`, breaks at spaces
/// (a word wider than the line is split anywhere); without, at any character
/// (code). Never returns an empty vector.
#[must_use]
pub fn wrap(
    spans: Vec<Span<'static>>,
    avail: usize,
    first: &str,
    rest: &str,
    words: bool,
) -> Vec<Line<'static>> {
    let avail = avail.max(1);
    // Split into tokens: runs of non-space and runs of space, each with its style.
    let mut tokens: Vec<(String, Style, bool)> = Vec::new();
    for span in spans {
        let style = span.style;
        let mut cur = String::new();
        let mut cur_space = false;
        for ch in span.content.chars() {
            let ch = if ch == '\t' { ' ' } else { ch };
            let space = words && ch == ' ';
            if !cur.is_empty() && (space != cur_space || !words) {
                tokens.push((std::mem::take(&mut cur), style, cur_space));
            }
            cur_space = space;
            cur.push(ch);
        }
        if !cur.is_empty() {
            tokens.push((cur, style, cur_space));
        }
    }
    let mut lines = Vec::new();
    let mut line: Vec<Span<'static>> = vec![Span::raw(first.to_string())];
    let mut used = 0usize;
    let mut fresh = true;
    let mut newline = |line: &mut Vec<Span<'static>>, used: &mut usize, fresh: &mut bool| {
        let done = std::mem::replace(line, vec![Span::raw(rest.to_string())]);
        lines.push(Line::from(done));
        *used = 0;
        *fresh = true;
    };
    for (text, style, space) in tokens {
        let w = width(&text);
        if space {
            // Spaces at a break are dropped; elsewhere kept.
            if used + w <= avail {
                push(&mut line, text, style);
                used += w;
            } else {
                newline(&mut line, &mut used, &mut fresh);
            }
            continue;
        }
        if used + w > avail && !fresh && w <= avail {
            // Drop the trailing spaces of the line being closed.
            trim_trailing_spaces(&mut line);
            newline(&mut line, &mut used, &mut fresh);
        }
        if used + w <= avail {
            push(&mut line, text, style);
            used += w;
            fresh = false;
            continue;
        }
        // Wider than what is left: split by characters.
        for ch in text.chars() {
            let cw = ch.width().unwrap_or(0);
            if used + cw > avail && used > 0 {
                newline(&mut line, &mut used, &mut fresh);
            }
            push(&mut line, ch.to_string(), style);
            used += cw;
            fresh = false;
        }
    }
    lines.push(Line::from(line));
    lines
}

fn push(line: &mut Vec<Span<'static>>, text: String, style: Style) {
    let n = line.len();
    if let Some(last) = line.last_mut()
        && last.style == style
        && n > 1
    {
        last.content.to_mut().push_str(&text);
        return;
    }
    line.push(Span::styled(text, style));
}

fn trim_trailing_spaces(line: &mut [Span<'static>]) {
    for span in line.iter_mut().skip(1).rev() {
        let trimmed = span.content.trim_end_matches(' ').len();
        let all = trimmed == 0;
        span.content.to_mut().truncate(trimmed);
        if !all {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect()
    }

    fn plain(s: &str, w: usize) -> Vec<String> {
        text(&render(s, w, 0, Theme::new(false), Style::new()))
    }

    #[test]
    fn words_wrap_at_spaces_and_long_words_split() {
        assert_eq!(plain("aaa bbb ccc", 7), ["aaa bbb", "ccc"]);
        assert_eq!(plain("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(plain("a\n\nb", 10), ["a", "", "b"]);
    }

    #[test]
    fn wide_characters_count_two_cells() {
        let lines = plain("日本語テキスト", 6);
        assert_eq!(lines, ["日本語", "テキス", "ト"]);
        assert!(lines.iter().all(|l| width(l) <= 6));
    }

    #[test]
    fn lists_hang_and_headings_lose_their_hashes() {
        assert_eq!(plain("- one two three", 9), ["• one two", "  three"]);
        assert_eq!(plain("12. first", 20), ["12. first"]);
        assert_eq!(plain("## Title", 20), ["Title"]);
    }

    #[test]
    fn code_blocks_keep_their_text_and_an_open_fence_stays_code() {
        let t = Theme::new(true);
        let lines = render("```rust\nlet x = 1;\n", 40, 2, t, Style::new());
        assert_eq!(text(&lines), ["  ```rust", "  let x = 1;", "  "]);
        assert_eq!(lines[1].spans[1].style, t.code());
        // After the closing fence, text is prose again.
        let lines = render("```\nx\n```\n**b**", 40, 0, t, Style::new());
        assert_eq!(text(&lines), ["```", "x", "```", "b"]);
        assert!(
            lines[3].spans[1]
                .style
                .add_modifier
                .contains(Modifier::BOLD)
        );
    }

    #[test]
    fn inline_markup_and_unmatched_markers() {
        let t = Theme::new(true);
        let spans = inline("a `b` **c** *d* snake_case_name 2*3", t, Style::new());
        let parts: Vec<&str> = spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(
            parts,
            ["a ", "b", " ", "c", " ", "d", " snake_case_name 2*3"]
        );
        assert_eq!(spans[1].style, t.code());
        assert!(spans[5].style.add_modifier.contains(Modifier::ITALIC));
        let open = inline("**not closed", t, Style::new());
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].content, "**not closed");
    }

    #[test]
    fn nothing_is_wider_than_asked() {
        let s = "# A heading that is long\n- item with `code span` and **bold words** here\n> quoted text that wraps around\n```\nfn main() { println!(\"a long line of code\"); }\n```";
        for w in [8, 13, 20, 40] {
            for l in render(s, w, 2, Theme::new(false), Style::new()) {
                assert!(l.width() <= w, "{w}: {l:?}");
            }
        }
    }
}

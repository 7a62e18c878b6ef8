//! Progress on stderr, through `indicatif`: one self-rewriting line when
//! stderr is a terminal, nothing otherwise (logs and pipes get the start and
//! end lines the callers print anyway). One kind for downloads (`pull`'s, and
//! the demo model's through hf-hub), one for loading a model.

use std::fmt;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressFinish, ProgressState, ProgressStyle};

/// Redraws per second, at most.
const REDRAW_HZ: u8 = 10;

/// A download: label, percent, bar, bytes, rate and time left. `done`,
/// `total`, `rate` and `left` are ours (below): decimal units as [`size`]
/// prints them, and a rate of this run's bytes only.
const DOWNLOAD: &str = "{prefix} {percent:>3}% {bar:24} {done} / {total}{rate}{left}";

/// Loading a model: its name and the percent.
const LOADING: &str = "loading {prefix} {percent:>3}%";

/// One progress line; its clones draw the same line. Dropping the last one
/// unfinished does what [`Progress::finish`] does.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A download of `label`, `total` bytes, `resumed` of them already on
    /// disk (an interrupted download): the rate and the time left count only
    /// what this run transfers. Its last state stays on screen.
    #[must_use]
    pub fn download(label: &str, total: u64, resumed: u64) -> Self {
        Self::download_to(stderr(true), label, total, resumed)
    }

    fn download_to(target: ProgressDrawTarget, label: &str, total: u64, resumed: u64) -> Self {
        // The templates are constants (the unit tests draw both); a bad one
        // would cost the look of the line, never the download.
        let style = ProgressStyle::with_template(DOWNLOAD)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("█░")
            .with_key("done", |s: &ProgressState, w: &mut dyn fmt::Write| {
                let _ = w.write_str(&size(s.pos()));
            })
            .with_key("total", |s: &ProgressState, w: &mut dyn fmt::Write| {
                let _ = w.write_str(&size(s.len().unwrap_or(0)));
            })
            .with_key("rate", move |s: &ProgressState, w: &mut dyn fmt::Write| {
                if let Some(rate) = rate(s, resumed) {
                    let _ = write!(w, "  {}/s", size(rate as u64));
                }
            })
            .with_key("left", move |s: &ProgressState, w: &mut dyn fmt::Write| {
                let (done, total) = (s.pos(), s.len().unwrap_or(0));
                if let Some(rate) = rate(s, resumed)
                    && done < total
                {
                    let _ = write!(w, "  {} left", clock((total - done) as f64 / rate));
                }
            });
        let bar = ProgressBar::with_draw_target(Some(total), target)
            .with_style(style)
            .with_prefix(label.to_string())
            .with_position(resumed)
            .with_finish(ProgressFinish::Abandon);
        Self { bar }
    }

    /// Loading `name`: its percent, cleared when done. Drawn only when
    /// `show` and stderr is a terminal (not while llama.cpp logs there).
    #[must_use]
    pub fn loading(name: &str, show: bool) -> Self {
        Self::loading_to(stderr(show), name)
    }

    fn loading_to(target: ProgressDrawTarget, name: &str) -> Self {
        let style =
            ProgressStyle::with_template(LOADING).unwrap_or_else(|_| ProgressStyle::default_bar());
        let bar = ProgressBar::with_draw_target(Some(100), target)
            .with_style(style)
            .with_prefix(name.to_string())
            .with_finish(ProgressFinish::AndClear);
        Self { bar }
    }

    /// `done` bytes of the file are on disk now.
    pub fn update(&self, done: u64) {
        self.bar.set_position(done);
    }

    /// The load is `fraction` (0.0…1.0) done.
    pub fn set_fraction(&self, fraction: f32) {
        self.bar
            .set_position((fraction.clamp(0.0, 1.0) * 100.0) as u64);
    }

    /// End the line: a download's last state stays, a load's is cleared.
    pub fn finish(&self) {
        if !self.bar.is_finished() {
            self.bar.finish_using_style();
        }
    }
}

/// Stderr, redrawn at most [`REDRAW_HZ`] times a second, when `show`;
/// indicatif draws nothing there when it is not a terminal (or `TERM` is
/// unset or `dumb`).
fn stderr(show: bool) -> ProgressDrawTarget {
    if show {
        ProgressDrawTarget::stderr_with_hz(REDRAW_HZ)
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// Bytes a second that this run transferred (those past `resumed`), once
/// there is something to say.
fn rate(s: &ProgressState, resumed: u64) -> Option<f64> {
    let elapsed = s.elapsed().as_secs_f64();
    let rate = s.pos().saturating_sub(resumed) as f64 / elapsed;
    (elapsed > 0.2 && rate > 0.0).then_some(rate)
}

/// Decimal units, as file sizes on the hub are shown.
#[must_use]
pub fn size(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} kB", b / 1e3)
    } else {
        format!("{bytes} B")
    }
}

fn clock(secs: f64) -> String {
    let s = secs.round().min(359_999.0) as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use indicatif::TermLike;

    use super::*;

    /// A terminal that keeps what is drawn on it: a cleared line starts a
    /// new entry.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<Vec<String>>>);

    impl Screen {
        fn target(&self) -> ProgressDrawTarget {
            ProgressDrawTarget::term_like(Box::new(self.clone()))
        }

        /// The text of the last draw (without the padding to the width).
        fn last(&self) -> String {
            let lines = self.0.lock().expect("lock");
            lines
                .last()
                .map(|l| l.trim_end().to_string())
                .unwrap_or_default()
        }
    }

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            200
        }
        fn move_cursor_up(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> io::Result<()> {
            let mut lines = self.0.lock().expect("lock");
            match lines.last_mut() {
                Some(l) => l.push_str(s),
                None => lines.push(s.to_string()),
            }
            Ok(())
        }
        fn clear_line(&self) -> io::Result<()> {
            self.0.lock().expect("lock").push(String::new());
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_download_shows_percent_bar_bytes_rate_and_time_left() {
        let screen = Screen::default();
        let p = Progress::download_to(screen.target(), "m.gguf", 1_000_000_000, 0);
        // Started 10 s ago, half done: 50 MB/s, 10 s to go.
        let _ = p.bar.clone().with_elapsed(Duration::from_secs(10));
        p.update(500_000_000);
        p.bar.force_draw();
        let l = screen.last();
        assert!(l.starts_with("m.gguf  50% "), "{l}");
        assert_eq!(l.matches('█').count(), 12, "{l}");
        assert_eq!(l.matches('░').count(), 12, "{l}");
        assert!(
            l.contains(" 500.0 MB / 1.00 GB  50.0 MB/s  0:10 left"),
            "{l}"
        );

        p.update(1_000_000_000);
        p.finish();
        let l = screen.last();
        assert!(l.starts_with("m.gguf 100% "), "{l}");
        assert!(l.contains("1.00 GB / 1.00 GB  "), "{l}");
        assert!(l.ends_with("MB/s"), "no time left when done: {l}");
    }

    #[test]
    fn a_resumed_download_rates_only_this_runs_bytes() {
        let screen = Screen::default();
        let p = Progress::download_to(screen.target(), "m", 1_000_000_000, 400_000_000);
        p.bar.force_draw();
        let l = screen.last();
        assert!(l.contains(" 40% "), "starts where it stopped: {l}");
        assert!(!l.contains("/s") && !l.contains("left"), "no rate yet: {l}");
        // 500 MB more in 10 s: 50 MB/s, not 90.
        let _ = p.bar.clone().with_elapsed(Duration::from_secs(10));
        p.update(900_000_000);
        p.bar.force_draw();
        let l = screen.last();
        assert!(
            l.contains("900.0 MB / 1.00 GB  50.0 MB/s  0:02 left"),
            "{l}"
        );
    }

    #[test]
    fn a_failed_download_keeps_its_last_state() {
        let screen = Screen::default();
        let p = Progress::download_to(screen.target(), "m", 1000, 0);
        p.update(300);
        drop(p);
        let l = screen.last();
        assert!(
            l.starts_with("m  30% ") && l.contains("300 B / 1 kB"),
            "{l}"
        );
    }

    #[test]
    fn loading_shows_the_percent_and_is_cleared_when_done() {
        let screen = Screen::default();
        let p = Progress::loading_to(screen.target(), "m.gguf");
        p.set_fraction(0.424);
        p.bar.force_draw();
        assert_eq!(screen.last(), "loading m.gguf  42%");
        p.finish();
        assert_eq!(screen.last(), "", "cleared");
    }

    #[test]
    fn sizes_and_clocks() {
        assert_eq!(size(253_113_024), "253.1 MB");
        assert_eq!(size(4_920_000_000), "4.92 GB");
        assert_eq!(size(999), "999 B");
        assert_eq!(clock(3725.0), "1:02:05");
        assert_eq!(clock(59.4), "0:59");
    }
}

//! The download progress bar: one self-rewriting line on stderr when stderr
//! is a terminal, nothing otherwise (logs and pipes get the start and end
//! lines `pull` prints anyway).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the line is redrawn at most.
const REDRAW: Duration = Duration::from_millis(100);
/// Width of the bar itself, in cells.
const BAR: usize = 24;

/// Progress of one file's transfer.
#[derive(Debug)]
pub struct Progress {
    enabled: bool,
    label: String,
    total: u64,
    /// Bytes already on disk when this run started (a resumed download):
    /// the rate counts only what this run transferred.
    resumed: u64,
    started: Instant,
    last_draw: Option<Instant>,
    drawn: bool,
}

impl Progress {
    /// A bar for `label` of `total` bytes, `resumed` of them already on
    /// disk; drawn only when stderr is a terminal.
    #[must_use]
    pub fn new(label: &str, total: u64, resumed: u64) -> Self {
        Self {
            enabled: std::io::stderr().is_terminal(),
            label: label.to_string(),
            total,
            resumed,
            started: Instant::now(),
            last_draw: None,
            drawn: false,
        }
    }

    /// `done` bytes of the file are on disk now.
    pub fn update(&mut self, done: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if self
            .last_draw
            .is_some_and(|t| now.duration_since(t) < REDRAW && done < self.total)
        {
            return;
        }
        self.last_draw = Some(now);
        let elapsed = now.duration_since(self.started).as_secs_f64();
        let rate = if elapsed > 0.2 {
            done.saturating_sub(self.resumed) as f64 / elapsed
        } else {
            0.0
        };
        let text = line(&self.label, done, self.total, rate);
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{text}\x1b[K");
        let _ = err.flush();
        self.drawn = true;
    }

    /// End the line (the bar stays, as the last state).
    pub fn finish(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The text of the line: label, percent, bar, bytes, rate and time left.
#[must_use]
pub fn line(label: &str, done: u64, total: u64, rate: f64) -> String {
    let frac = if total == 0 {
        1.0
    } else {
        (done as f64 / total as f64).clamp(0.0, 1.0)
    };
    let filled = ((frac * BAR as f64).round() as usize).min(BAR);
    let bar: String = "█".repeat(filled) + &"░".repeat(BAR - filled);
    let eta = if rate > 0.0 && done < total {
        let secs = (total - done) as f64 / rate;
        format!("  {} left", clock(secs))
    } else {
        String::new()
    };
    let rate = if rate > 0.0 {
        format!("  {}/s", size(rate as u64))
    } else {
        String::new()
    };
    format!(
        "{label} {:3.0}% {bar} {} / {}{rate}{eta}",
        frac * 100.0,
        size(done),
        size(total)
    )
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
    use super::*;

    #[test]
    fn the_line_shows_percent_bytes_rate_and_time_left() {
        let l = line("m.gguf", 500_000_000, 1_000_000_000, 50e6);
        assert!(l.starts_with("m.gguf  50% "), "{l}");
        assert!(l.contains("500.0 MB / 1.00 GB"), "{l}");
        assert!(l.contains("50.0 MB/s"), "{l}");
        assert!(l.contains("0:10 left"), "{l}");
        assert_eq!(l.matches('█').count(), BAR / 2);
        let done = line("m", 10, 10, 1.0);
        assert!(done.contains("100%") && !done.contains("left"), "{done}");
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

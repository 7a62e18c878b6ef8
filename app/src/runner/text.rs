//! Turning generated token pieces into text that is safe to print as it
//! streams: whole UTF-8 characters only, and nothing that might turn out to be
//! the start of a stop string.

/// Reassembles UTF-8 from token pieces: a token may end in the middle of a
/// multi-byte character (emoji, CJK); those bytes wait for the next piece.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Add a piece's bytes; returns the text that is now complete.
    /// Bytes that can never become valid UTF-8 come out as U+FFFD.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // SAFETY-free: the prefix was just validated.
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: keep it for later.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        // Invalid bytes: replace them and go on.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// What is left at the end of generation (an unfinished character).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

/// Holds back text that could be the beginning of a stop string, and finds the
/// first stop string in the stream.
#[derive(Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
}

/// What [`StopMatcher::push`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Matched {
    /// Text safe to emit now; generation goes on.
    Go(String),
    /// A stop string was found: emit this text (before the stop string) and stop.
    Stop(String, String),
}

impl StopMatcher {
    /// A matcher for these stop strings (empty ones are ignored).
    pub fn new(stops: impl IntoIterator<Item = String>) -> Self {
        Self {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
        }
    }

    /// Add text; returns what may be emitted.
    pub fn push(&mut self, text: &str) -> Matched {
        self.held.push_str(text);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()).map(|at| (at, s)))
            .min_by_key(|(at, _)| *at);
        if let Some((at, stop)) = first {
            let stop = stop.clone();
            let before = self.held[..at].to_string();
            self.held.clear();
            return Matched::Stop(before, stop);
        }
        // Keep the longest tail that is a proper prefix of some stop string.
        let keep = self
            .stops
            .iter()
            .map(|s| longest_suffix_prefix(&self.held, s))
            .max()
            .unwrap_or(0);
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        Matched::Go(out)
    }

    /// The held-back text, at the end of generation.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// Length of the longest suffix of `text` that is a proper prefix of `stop`,
/// on character boundaries.
fn longest_suffix_prefix(text: &str, stop: &str) -> usize {
    let max = text.len().min(stop.len().saturating_sub(1));
    (1..=max)
        .rev()
        .find(|&n| {
            let start = text.len() - n;
            text.is_char_boundary(start) && stop.starts_with(&text[start..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_multibyte_characters_wait_for_their_end() {
        let mut s = Utf8Stream::default();
        let crab = "🦀".as_bytes();
        assert_eq!(s.push(&crab[..1]), "");
        assert_eq!(s.push(&crab[1..3]), "");
        assert_eq!(s.push(&[crab[3], b'!']), "🦀!");
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(&[b'a', 0xFF, b'b']), "a\u{FFFD}b");
        assert_eq!(s.push(&[0xE2, 0x82]), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }

    #[test]
    fn stop_strings_split_across_pieces_are_found_and_never_printed() {
        let mut m = StopMatcher::new(["<end_of_turn>".to_string()]);
        assert_eq!(m.push("Hello <end"), Matched::Go("Hello ".into()));
        assert_eq!(m.push("_of"), Matched::Go(String::new()));
        assert_eq!(
            m.push("_turn>tail"),
            Matched::Stop(String::new(), "<end_of_turn>".into())
        );
    }

    #[test]
    fn a_false_start_is_released() {
        let mut m = StopMatcher::new(["STOP".to_string()]);
        assert_eq!(m.push("ST"), Matched::Go(String::new()));
        assert_eq!(m.push("ART"), Matched::Go("START".into()));
        assert_eq!(m.push("S"), Matched::Go(String::new()));
        assert_eq!(m.finish(), "S");
    }

    #[test]
    fn the_earliest_stop_wins() {
        let mut m = StopMatcher::new(["b".to_string(), "xa".to_string()]);
        assert_eq!(m.push("1xab"), Matched::Stop("1".into(), "xa".into()));
    }

    #[test]
    fn without_stops_everything_passes() {
        let mut m = StopMatcher::new(Vec::new());
        assert_eq!(m.push("héllo"), Matched::Go("héllo".into()));
    }
}

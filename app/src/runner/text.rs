//! Turning generated token pieces into text that is safe to print as it
//! streams: whole UTF-8 characters only, and nothing that might turn out to be
//! the start of a stop string.

/// Reassembles UTF-8 from token pieces: a token may end in the middle of a
/// multi-byte character (emoji, CJK); those bytes wait for the next piece.
/// encoding_rs's streaming decoder does the bookkeeping (and replaces bytes
/// that can never be UTF-8 as the WHATWG standard says).
pub struct Utf8Stream {
    decoder: encoding_rs::Decoder,
}

impl Default for Utf8Stream {
    fn default() -> Self {
        Self {
            // Token pieces are text, not files: a piece that starts with the
            // bytes of a BOM means U+FEFF, which must not be eaten.
            decoder: encoding_rs::UTF_8.new_decoder_without_bom_handling(),
        }
    }
}

impl std::fmt::Debug for Utf8Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Utf8Stream").finish_non_exhaustive()
    }
}

impl Utf8Stream {
    /// Add a piece's bytes; returns the text that is now complete.
    /// Bytes that can never become valid UTF-8 come out as U+FFFD.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.decode(bytes, false)
    }

    /// What is left at the end of generation (an unfinished character, as
    /// U+FFFD); the stream starts afresh after it.
    pub fn finish(&mut self) -> String {
        let out = self.decode(&[], true);
        *self = Self::default();
        out
    }

    fn decode(&mut self, mut bytes: &[u8], last: bool) -> String {
        let mut out = String::new();
        loop {
            let room = self
                .decoder
                .max_utf8_buffer_length(bytes.len())
                .unwrap_or(bytes.len().saturating_mul(3).saturating_add(16));
            out.reserve(room);
            let (result, read, _) = self.decoder.decode_to_string(bytes, &mut out, last);
            bytes = &bytes[read..];
            if result == encoding_rs::CoderResult::InputEmpty {
                return out;
            }
        }
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
        let keep = held_back(&self.held, self.stops.iter().map(String::as_str));
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

/// How much of the end of `text` to hold back in a stream: the longest
/// suffix that is a proper prefix of one of `markers` (a stop string, a tag,
/// a header that the next piece may complete), on character boundaries.
pub fn held_back<'m>(text: &str, markers: impl IntoIterator<Item = &'m str>) -> usize {
    markers
        .into_iter()
        .map(|m| longest_suffix_prefix(text, m))
        .max()
        .unwrap_or(0)
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
        // A finished stream starts afresh.
        assert_eq!(s.push("é".as_bytes()), "é");
    }

    #[test]
    fn a_piece_that_starts_like_a_bom_keeps_it() {
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(&[0xEF, 0xBB, 0xBF, b'x']), "\u{FEFF}x");
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

//! Arbitrary bytes as the start of a GGUF file: the header reader (in memory
//! and streaming), then the model profile and a plan on a fixed machine when
//! each step succeeds. Nothing may panic (overflow checks are on: scripts/fuzz.sh
//! builds with debug assertions), and libFuzzer's -malloc_limit_mb catches
//! any allocation the input cannot back.

#![no_main]

use headroom_fuzz::MACHINE;
use headroom_planner::gguf::writer::to_bytes;
use headroom_planner::gguf::{GgufError, Header, parse_header, read_header};
use headroom_planner::plan::Settings;
use headroom_planner::profile;
use headroom_planner::solve::{self, Build};
use libfuzzer_sys::fuzz_target;

/// Headers compare through `Debug`: a NaN metadata value is not equal to
/// itself, but prints the same.
fn same(a: &Header, b: &Header) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

fuzz_target!(|data: &[u8]| {
    let from_slice = parse_header(data);
    let from_stream = read_header(data);
    let header = match (from_slice, from_stream) {
        (Ok(a), Ok(b)) => {
            assert!(same(&a, &b), "the two readers disagree");
            a
        }
        (Err(_), Err(_)) => return,
        (a, b) => panic!(
            "one reader accepts, the other refuses: slice {:?}, stream {:?}",
            a.err(),
            b.err()
        ),
    };
    assert!(header.header_bytes <= data.len() as u64);
    assert!(header.data_offset >= header.header_bytes);

    // What the reader kept, the writer writes back to the same header. Only
    // the header's length may change: invalid UTF-8 in string values is read
    // lossily, and U+FFFD is longer than the byte it replaces. The writer
    // pads to the alignment in memory, so a 2 GiB `general.alignment` (valid)
    // is left out here: it would trip -malloc_limit_mb in the harness.
    let written = if header.alignment <= 1 << 16 {
        to_bytes(&header)
    } else {
        Err(GgufError::BadAlignment {
            value: header.alignment,
        })
    };
    match written {
        Ok(bytes) => {
            let again = parse_header(&bytes).expect("a written header reads back");
            let unsized_ = |h: &Header| Header {
                header_bytes: 0,
                data_offset: 0,
                ..h.clone()
            };
            assert!(
                same(&unsized_(&header), &unsized_(&again)),
                "write then read changed the header"
            );
        }
        Err(GgufError::SkippedArray { .. } | GgufError::BadAlignment { .. }) => {}
        Err(e) => panic!("a parsed header does not write back: {e}"),
    }

    let Ok(model) = profile::profile(&header) else {
        return;
    };
    for build in [Build { gpu: true }, Build { gpu: false }] {
        let _ = solve::plan(&model, "fuzz.gguf", &Settings::default(), &MACHINE, build);
    }
});

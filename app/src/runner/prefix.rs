//! Prompt reuse between the jobs of one slot, as llama-server's
//! `cache_prompt` does: a chat client resends the whole conversation every
//! turn, so the slot whose KV cache already holds the longest prefix of the
//! new prompt (compared by tokens) takes it, its cache is cut back to that
//! prefix, and only the rest is evaluated.
//!
//! Cutting a cache back is not always possible. A recurrent state (Mamba,
//! RWKV, and the recurrent half of hybrid models) holds only the state after
//! its last token, and a sliding-window cache has already dropped the cells
//! older than its window. llama-server keeps checkpoints for those; here they
//! are reused only where the cache allows (an exact extension of what it
//! holds, or a cut the window still covers) and otherwise cleared and the
//! prompt evaluated again: slower, never wrong. Nothing is kept beyond the
//! slots' own KV cells, so reuse adds no memory to the plan.

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;

/// What kind of memory a model's context keeps, for cutting it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// Every layer attends to every earlier position: any prefix can be kept.
    Full,
    /// Some layers attend only to the last `n_swa` positions (Gemma 2/3,
    /// gpt-oss, …): a cut is kept when the window's cells are still there.
    SlidingWindow {
        /// The window, in positions.
        n_swa: usize,
    },
    /// A recurrent state (alone or beside attention): only an exact
    /// extension of the cached tokens can be kept.
    Recurrent,
}

impl Memory {
    /// The kind `model`'s context keeps. The window is read from the GGUF
    /// (`ARCH.attention.sliding_window`, as llama.cpp reads it).
    #[must_use]
    pub fn of(model: &LlamaModel) -> Memory {
        if model.is_recurrent() || model.is_hybrid() {
            return Memory::Recurrent;
        }
        let n_swa = model
            .meta_val_str("general.architecture")
            .ok()
            .and_then(|arch| {
                model
                    .meta_val_str(&format!("{arch}.attention.sliding_window"))
                    .ok()
            })
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if n_swa > 0 {
            Memory::SlidingWindow { n_swa }
        } else {
            Memory::Full
        }
    }
}

/// Tokens `a` and `b` share from the start.
#[must_use]
pub fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Which of the `free` slots takes `prompt`: the one that keeps the most
/// and loses the least, `shared − lost` (tokens of its cache the prompt starts
/// with, minus the tokens of its cache cut away); among equals the one used
/// least recently. So a conversation returns to the slot holding its
/// history, a regenerated answer too (only the old answer is lost), and a
/// new conversation that shares only a system prompt takes an empty slot
/// rather than cutting another conversation's history away.
/// `cached[i]` is what slot `i` holds, `used[i]` when it last ran (an
/// empty `free` gives 0).
#[must_use]
pub fn pick_slot(
    free: &[usize],
    cached: &[Vec<LlamaToken>],
    used: &[u64],
    prompt: &[LlamaToken],
) -> usize {
    free.iter()
        .copied()
        .max_by_key(|&i| {
            let shared = common_prefix(&cached[i], prompt);
            let lost = cached[i].len() - shared;
            (
                i64::try_from(shared).unwrap_or(i64::MAX) - i64::try_from(lost).unwrap_or(i64::MAX),
                std::cmp::Reverse(used[i]),
            )
        })
        .unwrap_or(0)
}

/// How many of a slot's `cached` tokens to keep for a prompt of
/// `prompt_len` tokens sharing `common` of them, before asking llama.cpp: at
/// least the prompt's last token is evaluated (its logits are needed), and a
/// recurrent state is kept only when nothing would be removed.
#[must_use]
pub fn keep(memory: Memory, cached: usize, common: usize, prompt_len: usize) -> usize {
    let keep = common.min(prompt_len.saturating_sub(1));
    if keep < cached && memory == Memory::Recurrent {
        0
    } else {
        keep
    }
}

/// After cutting a slot back to `keep` tokens, whether its cache still holds
/// what the next position attends to: `pos_min` is the smallest position
/// llama.cpp still has for the sequence (-1: none). With full attention
/// every position from 0 is there; a sliding window needs the last `n_swa`
/// positions before `keep` (llama-server's own test).
#[must_use]
pub fn window_holds(memory: Memory, pos_min: i32, keep: usize) -> bool {
    let Ok(pos_min) = usize::try_from(pos_min) else {
        // Nothing cached: only an empty prefix is whole.
        return keep == 0;
    };
    match memory {
        Memory::Full => pos_min == 0,
        Memory::SlidingWindow { n_swa } => pos_min <= keep.saturating_sub(n_swa),
        Memory::Recurrent => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[i32]) -> Vec<LlamaToken> {
        v.iter().copied().map(LlamaToken::new).collect()
    }

    #[test]
    fn the_slot_that_keeps_most_and_loses_least_takes_the_prompt() {
        // Slot 0: a conversation (1 2 3 4 5) and its answer (6 7); slot 1:
        // another one sharing the system prompt (1 2); slot 2: empty.
        let cached = vec![t(&[1, 2, 3, 4, 5, 6, 7]), t(&[1, 2, 8, 9]), t(&[])];
        let used = vec![5, 1, 0];
        let next_turn = t(&[1, 2, 3, 4, 5, 6, 7, 10, 11]);
        assert_eq!(pick_slot(&[0, 1, 2], &cached, &used, &next_turn), 0);
        // The answer regenerated: it loses only the old answer.
        assert_eq!(
            pick_slot(&[0, 1, 2], &cached, &used, &t(&[1, 2, 3, 4, 5])),
            0
        );
        // A new conversation with the same system prompt: the empty slot,
        // not a cut of another history.
        assert_eq!(pick_slot(&[0, 1, 2], &cached, &used, &t(&[1, 2, 12])), 2);
        // No empty slot: the one that loses least.
        assert_eq!(pick_slot(&[0, 1], &cached, &used, &t(&[1, 2, 12])), 1);
        // Nothing shared and both equally full: the least recently used.
        let same = vec![t(&[1]), t(&[2])];
        assert_eq!(pick_slot(&[0, 1], &same, &used, &t(&[7])), 1);
    }

    #[test]
    fn at_least_one_token_is_evaluated_and_recurrent_state_is_not_cut() {
        // The whole prompt is cached: its last token is evaluated again.
        assert_eq!(keep(Memory::Full, 10, 10, 10), 9);
        assert_eq!(keep(Memory::Full, 10, 6, 20), 6);
        // A conversation that grew: the cache is kept whole.
        assert_eq!(keep(Memory::Recurrent, 10, 10, 30), 10);
        // A recurrent state cannot lose its last token, nor a tail.
        assert_eq!(keep(Memory::Recurrent, 10, 10, 10), 0);
        assert_eq!(keep(Memory::Recurrent, 10, 6, 30), 0);
        assert_eq!(keep(Memory::SlidingWindow { n_swa: 4 }, 10, 6, 30), 6);
    }

    #[test]
    fn a_sliding_window_must_still_hold_the_positions_it_attends_to() {
        assert!(window_holds(Memory::Full, 0, 100));
        assert!(!window_holds(Memory::Full, 3, 100));
        let swa = Memory::SlidingWindow { n_swa: 512 };
        assert!(window_holds(swa, 0, 100));
        assert!(window_holds(swa, 488, 1000));
        assert!(!window_holds(swa, 489, 1000));
        assert!(window_holds(swa, -1, 0));
        assert!(!window_holds(swa, -1, 5));
    }
}

//! The prompt a loaded model is given: its chat format (the model's own
//! template, a named one, or a file) and the tokens of the rendered text.

use anyhow::Result;

use super::Engine;
use super::template::{ChatFormat, TemplateChoice};

/// The chat format for a loaded model.
///
/// # Errors
/// A template that does not render.
pub fn chat_format(engine: &Engine, choice: &TemplateChoice) -> Result<ChatFormat> {
    let model = engine.model();
    let own = model.meta_val_str("tokenizer.chat_template").ok();
    let arch = model
        .meta_val_str("general.architecture")
        .unwrap_or_default();
    let (bos, eos) = engine.bos_eos();
    ChatFormat::resolve(choice, own.as_deref(), &arch, &bos, &eos)
}

/// Tokenize a rendered prompt: the template may already start with the BOS
/// text; otherwise the model's own BOS rule applies.
///
/// # Errors
/// As [`Engine::tokenize`].
pub fn tokenize_prompt(engine: &Engine, text: &str) -> Result<Vec<llama_cpp_2::token::LlamaToken>> {
    let (bos, _) = engine.bos_eos();
    let has_bos = !bos.is_empty() && text.starts_with(&bos);
    engine.tokenize(text, !has_bos)
}

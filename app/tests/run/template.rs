//! Chat formatting against exact expected prompts: the Gemma fallback the demo
//! model needs, llama.cpp's built-ins, Jinja through minijinja (files and GGUF
//! templates llama.cpp does not recognise), and the errors a user can meet;
//! last, templates that never finish, refused in a few seconds by the
//! formatter and by `headroom run` on a GGUF that carries one.

use headroom::runner::template::{ChatFormat, Message, TemplateChoice, known_names};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BOS: &str = "<bos>";
const EOS: &str = "<eos>";

fn chat() -> Vec<Message> {
    vec![
        Message::user("Hello"),
        Message::assistant("Hi there."),
        Message::user("What is 2+2?"),
    ]
}

fn with_system() -> Vec<Message> {
    let mut m = vec![Message::system("You are terse.")];
    m.extend(chat());
    m
}

fn auto(gguf: Option<&str>, arch: &str) -> ChatFormat {
    ChatFormat::resolve(&TemplateChoice::Auto, gguf, arch, BOS, EOS).expect("resolves")
}

fn named(name: &str) -> ChatFormat {
    ChatFormat::resolve(&TemplateChoice::Name(name.into()), None, "llama", BOS, EOS)
        .expect("resolves")
}

fn jinja_file(src: &str) -> (tempfile::NamedTempFile, ChatFormat) {
    let mut file = tempfile::Builder::new()
        .suffix(".jinja")
        .tempfile()
        .expect("temp file");
    file.write_all(src.as_bytes()).expect("write template");
    let choice = TemplateChoice::File(file.path().to_path_buf());
    let format = ChatFormat::resolve(&choice, None, "llama", BOS, EOS).expect("resolves");
    (file, format)
}

#[test]
fn gemma_fallback_renders_the_gemma_turn_format() {
    let f = auto(None, "gemma3");
    assert_eq!(
        f.describe(),
        "assets/templates/gemma.jinja (fallback for gemma3)"
    );
    assert_eq!(
        f.render(&chat(), true).expect("renders"),
        "<start_of_turn>user\nHello<end_of_turn>\n\
         <start_of_turn>model\nHi there.<end_of_turn>\n\
         <start_of_turn>user\nWhat is 2+2?<end_of_turn>\n\
         <start_of_turn>model\n"
    );
    assert_eq!(f.stop_strings(), vec!["<end_of_turn>"]);
}

#[test]
fn gemma_fallback_folds_the_system_text_into_the_first_user_turn() {
    let f = auto(None, "gemma3");
    assert_eq!(
        f.render(&with_system(), false).expect("renders"),
        "<start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>\n\
         <start_of_turn>model\nHi there.<end_of_turn>\n\
         <start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
    );
    // The template does it itself, so describe() does not announce folding.
    assert!(!f.describe().contains("system"), "{}", f.describe());
}

#[test]
fn chatml_through_llama_cpp_builtin() {
    let f = named("chatml");
    assert_eq!(f.describe(), "llama.cpp built-in 'chatml'");
    assert_eq!(
        f.render(&with_system(), true).expect("renders"),
        "<|im_start|>system\nYou are terse.<|im_end|>\n\
         <|im_start|>user\nHello<|im_end|>\n\
         <|im_start|>assistant\nHi there.<|im_end|>\n\
         <|im_start|>user\nWhat is 2+2?<|im_end|>\n\
         <|im_start|>assistant\n"
    );
    assert_eq!(f.stop_strings(), vec!["<|im_end|>"]);
}

#[test]
fn gguf_template_llama_cpp_recognises_is_rendered_by_llama_cpp() {
    // Qwen2.5's template, abridged: llama.cpp sees `<|im_start|>` and uses
    // its ChatML code; the default system prompt only the Jinja would add
    // must therefore be absent.
    let qwen = "{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\\nYou are Qwen.<|im_end|>\\n' }}{%- endif %}\
                {%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}\
                {%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
    let f = auto(Some(qwen), "qwen2");
    assert_eq!(f.describe(), "model's own (llama.cpp built-in 'chatml')");
    let text = f.render(&[Message::user("Hi")], true).expect("renders");
    assert_eq!(
        text,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[test]
fn jinja_file_with_a_loop_renders_through_minijinja() {
    let (_file, f) = jinja_file(
        "{{ bos_token }}{% for m in messages %}\n\
         [{{ loop.index }}:{{ m.role | upper }}] {{ m.content.strip() }}\n\
         {% endfor %}\n\
         {% if add_generation_prompt %}[{{ messages | length + 1 }}:ASSISTANT]{% endif %}\n",
    );
    assert!(f.describe().ends_with(".jinja"), "{}", f.describe());
    assert_eq!(
        f.render(&[Message::user("  Hello "), Message::assistant("Hi")], true)
            .expect("renders"),
        // The leading <bos> is dropped: llama.cpp's tokenizer adds it.
        "[1:USER] Hello\n[2:ASSISTANT] Hi\n[3:ASSISTANT]"
    );
}

#[test]
fn gguf_template_llama_cpp_does_not_know_falls_back_to_minijinja() {
    // Python methods, namespace(), tojson and raise_exception as Hugging Face
    // templates use them; no marker llama.cpp knows.
    let tmpl = "{%- set ns = namespace(n=0) -%}\
                {%- for message in messages -%}\
                  {%- if message['role'] not in ['system', 'user', 'assistant'] -%}{{ raise_exception('bad role') }}{%- endif -%}\
                  {%- set ns.n = ns.n + 1 -%}\
                  {{- '<<' + message['role'].upper() + '>>' + message['content'].strip() + '<<END>>' -}}\
                {%- endfor -%}\
                {%- if add_generation_prompt -%}{{- '<<ASSISTANT>>' -}}{%- endif -%}\
                {{- '' if ns.n > 0 else ([1] | tojson) -}}";
    let f = auto(Some(tmpl), "newarch");
    assert_eq!(f.describe(), "model's own (Jinja)");
    assert_eq!(
        f.render(&with_system(), true).expect("renders"),
        "<<SYSTEM>>You are terse.<<END>><<USER>>Hello<<END>><<ASSISTANT>>Hi there.<<END>>\
         <<USER>>What is 2+2?<<END>><<ASSISTANT>>"
    );
    assert_eq!(f.stop_strings(), Vec::<String>::new());
}

#[test]
fn template_without_a_system_role_gets_it_folded() {
    // Gemma 2's rule, in a template llama.cpp does not recognise.
    let tmpl = "{%- if messages[0]['role'] == 'system' -%}{{ raise_exception('System role not supported') }}{%- endif -%}\
                {%- for m in messages -%}<|{{ m.role }}|>{{ m.content }}<|done|>{%- endfor -%}\
                {%- if add_generation_prompt -%}<|assistant|>{%- endif -%}";
    let f = auto(Some(tmpl), "newarch");
    assert!(f.describe().contains("first user turn"), "{}", f.describe());
    assert_eq!(
        f.render(&[Message::system("Be kind."), Message::user("Hi")], true)
            .expect("renders"),
        "<|user|>Be kind.\n\nHi<|done|><|assistant|>"
    );
}

#[test]
fn raising_template_gives_a_clear_error() {
    let (_file, f) = jinja_file(
        "{%- for m in messages -%}\
           {%- if (m.role == 'user') != (loop.index0 % 2 == 0) -%}\
             {{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\
           {%- endif -%}{{ m.content }}\
         {%- endfor -%}",
    );
    let err = f
        .render(&[Message::user("a"), Message::user("b")], true)
        .expect_err("two user turns in a row");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("the template raised: Conversation roles must alternate"),
        "{msg}"
    );
    assert!(msg.contains("formatting the chat with"), "{msg}");
}

#[test]
fn unknown_name_lists_the_known_ones() {
    let err = ChatFormat::resolve(
        &TemplateChoice::Name("chatmlx".into()),
        None,
        "llama",
        BOS,
        EOS,
    )
    .expect_err("unknown");
    let msg = err.to_string();
    assert!(msg.contains("\"chatmlx\""), "{msg}");
    for name in ["chatml", "gemma", "llama3", "mistral", "mistral-v7-tekken"] {
        assert!(msg.contains(name), "{name} missing from {msg}");
    }
    assert!(known_names().contains(&"phi3".to_string()));
}

#[test]
fn missing_or_broken_files_are_errors() {
    let choice = TemplateChoice::File("/nonexistent/chat.jinja".into());
    let err = ChatFormat::resolve(&choice, None, "llama", BOS, EOS).expect_err("missing");
    assert!(
        format!("{err:#}").contains("reading chat template"),
        "{err:#}"
    );

    let mut file = tempfile::Builder::new()
        .suffix(".jinja")
        .tempfile()
        .expect("temp file");
    file.write_all(b"{% for m in messages %}").expect("write");
    let choice = TemplateChoice::File(file.path().to_path_buf());
    let err = ChatFormat::resolve(&choice, None, "llama", BOS, EOS).expect_err("broken");
    assert!(
        format!("{err:#}").contains("parsing chat template"),
        "{err:#}"
    );
}

#[test]
fn broken_gguf_template_falls_back_by_architecture() {
    let f = auto(Some("{% if %}"), "gemma3");
    assert!(
        f.describe()
            .starts_with("assets/templates/gemma.jinja (the model's own template cannot be used"),
        "{}",
        f.describe()
    );
    assert!(
        f.render(&chat(), true)
            .expect("renders")
            .ends_with("<start_of_turn>model\n")
    );
}

#[test]
fn unknown_architecture_guesses_chatml_and_says_so() {
    let f = auto(None, "rwkv7");
    assert!(f.describe().contains("a guess"), "{}", f.describe());
    assert_eq!(f.stop_strings(), vec!["<|im_end|>"]);
}

/// Where llama.cpp has a built-in and we have an asset of the same format,
/// both must write the same text, system message and whitespace included.
#[test]
fn assets_agree_with_llama_cpp_builtins() {
    let messages = vec![
        Message::system("You are terse."),
        Message::user("Hello"),
        Message::assistant("Hi there."),
        Message::user("What is 2+2?"),
    ];
    let pairs = [
        ("chatml", "qwen3", "chatml"),
        ("gemma", "gemma3", "gemma"),
        ("llama3", "llama", "llama3"),
        ("phi3", "phi3", "phi3"),
        ("mistral", "mistral3", "mistral-v7-tekken"),
    ];
    for (asset, arch, builtin) in pairs {
        let eos = if asset == "mistral" { "</s>" } else { EOS };
        let fallback =
            ChatFormat::resolve(&TemplateChoice::Auto, None, arch, BOS, eos).expect("asset");
        assert!(
            fallback
                .describe()
                .starts_with(&format!("assets/templates/{asset}.jinja")),
            "{}",
            fallback.describe()
        );
        let llama =
            ChatFormat::resolve(&TemplateChoice::Name(builtin.into()), None, arch, BOS, eos)
                .expect("builtin");
        for gen_prompt in [true, false] {
            assert_eq!(
                fallback
                    .render(&messages, gen_prompt)
                    .expect("asset renders"),
                llama
                    .render(&messages, gen_prompt)
                    .expect("builtin renders"),
                "{asset} vs llama.cpp {builtin}, add_generation_prompt={gen_prompt}"
            );
        }
        assert_eq!(fallback.stop_strings(), llama.stop_strings(), "{asset}");
    }
}

#[test]
fn named_asset_and_stop_strings_per_family() {
    let mistral = ChatFormat::resolve(
        &TemplateChoice::Name("mistral".into()),
        None,
        "llama",
        "<s>",
        "</s>",
    )
    .expect("asset by name");
    assert_eq!(mistral.describe(), "assets/templates/mistral.jinja");
    assert_eq!(mistral.stop_strings(), vec!["</s>"]);
    assert_eq!(named("llama3").stop_strings(), vec!["<|eot_id|>"]);
    assert_eq!(named("phi3").stop_strings(), vec!["<|end|>"]);
}

#[test]
fn hugging_face_conventions_work_in_jinja() {
    // What real templates lean on: `tools` is none (not undefined), `messages`
    // can be re-bound, `in` on a message, selectattr with tests, python
    // methods, and `strftime_now` for "Today Date".
    let (_file, f) = jinja_file(
        "{%- if tools is not none -%}{{ raise_exception('tools given') }}{%- endif -%}\n\
         {%- if messages[0]['role'] == 'system' -%}\n\
           {%- set system = messages[0]['content'] -%}\n\
           {%- set messages = messages[1:] -%}\n\
         {%- endif -%}\n\
         [{{ system | default('none') }}|{{ strftime_now('%Y') | length }}]\n\
         {%- for m in messages | selectattr('tool_calls', 'undefined') -%}\n\
           {%- if 'tool_calls' not in m and m is mapping -%}\n\
             {{ m.role.title() }}: {{ m.content.replace('2', 'two') }};\n\
           {%- endif -%}\n\
         {%- endfor -%}",
    );
    assert_eq!(
        f.render(&with_system(), false).expect("renders"),
        "[You are terse.|4]User: Hello;Assistant: Hi there.;User: What is two+two?;"
    );
}

/// A loop in a loop, each within minijinja's range limit: 10^10 steps.
const ENDLESS: &str =
    "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";

/// A macro that calls itself.
const RECURSIVE: &str = "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}";

/// The refusal of the model's own template, as `run` prints it after
/// `headroom: error: `.
fn refusal(detail: &str) -> String {
    format!(
        "the model's chat template did not finish ({detail}); give --chat-template NAME, or --raw with `headroom run`"
    )
}

/// Templates that never finish, and those that ask for too much at once, are
/// refused in a few seconds with one plain sentence, never replaced by the
/// fallback (whose rendering would hide what the file does).
#[test]
fn runaway_gguf_templates_are_refused_not_replaced() {
    // Burning fuel takes a core for seconds: not while a model runs.
    let _gate = crate::support::one_at_a_time();
    let cases = [
        (ENDLESS, "ran out of fuel after 10000000 steps".to_string()),
        (RECURSIVE, "nested deeper than 500 levels".to_string()),
        // Mutual recursion through macros, each call nesting a loop.
        (
            "{% macro a() %}{% for m in messages %}{{ b() }}{% endfor %}{% endmacro %}\
             {% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
            "nested deeper than 500 levels".to_string(),
        ),
        // Two recursive calls a level: 2^60 calls, each shallow enough.
        (
            "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
            "ran out of fuel after 10000000 steps".to_string(),
        ),
        // The example: minijinja refuses ranges over 100,000 items.
        (
            "{% for i in range(1000000000) %}{% for j in range(1000000000) %}x{% endfor %}{% endfor %}",
            "range has too many elements".to_string(),
        ),
        (
            "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
            format!("wrote more than {} bytes", 16 << 20),
        ),
        (
            "{{ messages | tojson(indent=1000000000) }}",
            "asked `tojson` for a size of 1000000000, over 10000".to_string(),
        ),
        (
            "{{ '%999999999s' | format('a') }}",
            "a `format` width over 10000".to_string(),
        ),
        (
            "{{ '{:>999999999}'.format('a') }}",
            "a `str.format` width over 10000".to_string(),
        ),
    ];
    for (src, detail) in cases {
        let t0 = Instant::now();
        let err = ChatFormat::resolve(&TemplateChoice::Auto, Some(src), "gemma3", BOS, EOS)
            .expect_err(src);
        let took = t0.elapsed();
        assert_eq!(format!("{err:#}"), refusal(&detail), "{src}");
        assert!(took < Duration::from_secs(5), "{src}: {took:?}");
    }
}

/// A template that runs away only on a conversation with a system message
/// (one of the probes that set a format up) is refused all the same.
#[test]
fn a_template_endless_on_a_system_message_is_refused() {
    let _gate = crate::support::one_at_a_time();
    let src = format!(
        "{{% if messages[0].role == 'system' %}}{ENDLESS}{{% endif %}}\
         {{% for m in messages %}}{{{{ m.content }}}}{{% endfor %}}"
    );
    let err = ChatFormat::resolve(&TemplateChoice::Auto, Some(&src), "gemma3", BOS, EOS)
        .expect_err("endless on a system message");
    assert_eq!(
        format!("{err:#}"),
        refusal("ran out of fuel after 10000000 steps")
    );
}

/// A GGUF template over 1 MiB is refused before anything reads it.
#[test]
fn an_oversized_gguf_template_is_refused() {
    let src = format!("{{# {} #}}", "x".repeat(1 << 20));
    let err = ChatFormat::resolve(&TemplateChoice::Auto, Some(&src), "gemma3", BOS, EOS)
        .expect_err("over 1 MiB");
    assert_eq!(
        format!("{err:#}"),
        format!(
            "the model's chat template is {} bytes, over the limit of 1048576 bytes; \
             give --chat-template NAME, or --raw with `headroom run`",
            src.len()
        )
    );
}

/// `--chat-template FILE` that never finishes: the same refusal, naming the file.
#[test]
fn an_endless_template_file_is_refused() {
    let mut file = tempfile::Builder::new()
        .suffix(".jinja")
        .tempfile()
        .expect("temp file");
    file.write_all(RECURSIVE.as_bytes())
        .expect("write template");
    let choice = TemplateChoice::File(file.path().to_path_buf());
    let err = ChatFormat::resolve(&choice, None, "llama", BOS, EOS).expect_err("recursive");
    assert_eq!(
        format!("{err:#}"),
        format!(
            "the chat template {} did not finish (nested deeper than 500 levels)",
            file.path().display()
        )
    );
}

/// The limits leave real templates a wide margin: a conversation of 5,000
/// messages renders with the Gemma fallback and with a Hugging Face style
/// template (namespace, Python methods, a loop over the messages reversed).
#[test]
fn long_conversations_render_within_the_limits() {
    let qwen_like = "{%- set ns = namespace(last=messages|length - 1) %}\
        {%- for m in messages[::-1] %}{%- if ns.last == messages|length - 1 and m.role == 'user' %}{%- set ns.last = loop.index0 %}{%- endif %}{%- endfor %}\
        {%- for m in messages %}{{- '<|turn|>' + m.role + '\\n' + m.content.strip() + '<|end|>\\n' }}{%- endfor %}\
        {%- if add_generation_prompt %}{{- '<|turn|>assistant\\n' }}{%- endif %}";
    let mut messages = vec![Message::system("You are terse.")];
    for i in 0..2500 {
        messages.push(Message::user(format!(
            "Question {i}: {}",
            "words ".repeat(30)
        )));
        messages.push(Message::assistant(format!("Answer {i}.")));
    }
    messages.push(Message::user("Last one."));
    for f in [auto(None, "gemma3"), auto(Some(qwen_like), "newarch")] {
        let t0 = Instant::now();
        let text = f.render(&messages, true).expect("renders");
        assert!(text.contains("Question 2499"), "{}", f.describe());
        assert!(
            t0.elapsed() < Duration::from_secs(1),
            "{}: {:?}",
            f.describe(),
            t0.elapsed()
        );
    }
}

/// The demo model with `template` as its chat template, at `dir/name.gguf`.
fn demo_with_template(dir: &Path, name: &str, template: &str) -> PathBuf {
    let path = dir.join(format!("{name}.gguf"));
    crate::demo::with_chat_template(crate::support::model(), &path, template);
    path
}

/// `headroom run` on a GGUF whose template never finishes: one error line,
/// exit 1, in under 5 s (the model loads first: the template is read from
/// the loaded model, and rendered before any generation).
#[test]
fn run_refuses_a_gguf_whose_template_never_ends() {
    use crate::support::{Sandbox, assert_one_line, one_at_a_time};

    let _gate = one_at_a_time();
    let sb = Sandbox::new();
    for (name, src, detail) in [
        ("endless", ENDLESS, "ran out of fuel after 10000000 steps"),
        ("recursive", RECURSIVE, "nested deeper than 500 levels"),
    ] {
        let gguf = demo_with_template(sb.path(), name, src);
        let t0 = Instant::now();
        let out = sb.run([
            "run".as_ref(),
            gguf.as_os_str(),
            "-p".as_ref(),
            "hi".as_ref(),
            "-n".as_ref(),
            "4".as_ref(),
        ]);
        let took = t0.elapsed();
        println!("{name}: refused in {:.2} s", took.as_secs_f64());
        let expected = refusal(detail);
        assert_one_line(&out, 1, "headroom: error: ", &[&expected], name);
        assert!(took < Duration::from_secs(5), "{name}: {took:?}");
    }
}

//! Jinja chat templates through minijinja, set up the way Hugging Face's
//! `apply_chat_template` sets up Jinja2, so GGUF `tokenizer.chat_template`
//! texts and `--chat-template FILE` render as they do in Python, and bounded,
//! because a template is code from whoever made the file: it may loop for
//! ever, recurse, or write without end.
//!
//! The bounds: the template's size ([`MAX_SOURCE_BYTES`]), minijinja's fuel
//! (one unit per VM instruction, [`FUEL`] per render), its recursion limit
//! ([`RECURSION_LIMIT`]), the rendered text's size ([`MAX_OUTPUT_BYTES`]),
//! the integer arguments of the built-in filters whose single call
//! allocates in proportion to them ([`MAX_SIZE_ARGUMENT`]), and, for the
//! instructions that are slow in themselves, a deadline ([`DEADLINE`],
//! [`render_in_time`]). A template that hits one is a [`Runaway`], which
//! callers refuse rather than work around.
//!
//! What these do not bound: the memory of values a template builds without
//! writing them, such as a string doubled by `~` in a loop or a capture
//! block. Each step costs one instruction, so fuel does not see their size,
//! and they can outgrow memory before any deadline; only a memory limit on
//! the process would stop them.
//!
//! This file depends on minijinja, minijinja-contrib, serde, serde_json and
//! libc alone:
//! the fuzz crate compiles it as is (`fuzz/fuzz_targets/template_render.rs`),
//! so the code fuzzed is the code that runs.

#[cfg(unix)]
use std::ffi::CString;
use std::fmt;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Once, mpsc};
use std::time::Duration;

use minijinja::value::{Rest, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, State, Value, context};
use serde::Serialize;

/// The largest template accepted. Real templates are a few KB; the largest
/// known (tool-calling ones with long instructions), under 100 KB.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;

/// Fuel per render: minijinja instructions a template may run before it is
/// stopped. Measured with `fuzz/examples/template_fuel.rs`: one render of a
/// conversation (a system message, then user and assistant in turn, 200
/// bytes each) takes, in instructions,
///
/// | template                             | 3 messages | 101    | 1,001  |
/// |--------------------------------------|-----------:|-------:|-------:|
/// | assets chatml, phi3                  |         57 |  1,723 | 17,023 |
/// | assets llama3                        |         62 |  1,826 | 18,026 |
/// | assets mistral                       |         67 |  2,272 | 22,522 |
/// | assets gemma                         |        106 |  3,193 | 31,543 |
/// | Qwen3 (Hugging Face)                 |        232 |  5,671 | 55,621 |
/// | Mistral Small 3.1 (Hugging Face)     |        176 |  5,419 | 53,569 |
/// | DeepSeek V3.1 (Hugging Face)         |        220 |  6,835 | 67,585 |
///
/// about 17 to 68 a message. Ten million is 148 times what the heaviest
/// takes for 1,001 messages (it would render some 150,000, more than any
/// context holds), and stops a template that never ends in about half a
/// second (0.55 s on a busy 2-core machine).
pub const FUEL: u64 = 10_000_000;

/// The deepest nesting of calls, loops and blocks minijinja allows
/// (`Environment::set_recursion_limit`). A macro call counts 4 levels more
/// than its caller. Real templates nest a few levels (a loop in a loop, a
/// macro rendering a JSON schema); this is minijinja's default and its
/// maximum without the `stacker` feature, and it fits the 2 MiB stack of a
/// spawned thread (the chat renders on one): see the test below.
pub const RECURSION_LIMIT: usize = 500;

/// The largest rendered prompt: 16 MiB is some four million tokens, more
/// than any model's context, so a longer text is a template writing without
/// end.
pub const MAX_OUTPUT_BYTES: usize = 16 << 20;

/// The longest one render may take. Real templates render a 1,000-message
/// conversation in milliseconds; fuel stops an endless one in about half a
/// second. This catches what fuel cannot see: instructions slow in
/// themselves (`'a' * 99999999`, a 100 MB string, in a loop takes 0.3 s a
/// turn for a few fuel each).
pub const DEADLINE: Duration = Duration::from_secs(2);

/// The stack of the thread [`render_in_time`] renders on: room for
/// [`RECURSION_LIMIT`] with a wide margin (it is reserved, not used).
const RENDER_STACK_BYTES: usize = 16 << 20;

/// The largest width, indent or count given to `indent`, `tojson`, `batch`,
/// `slice` and `format` (or Python's `str.format`): each allocates that
/// much in one call, beyond fuel's sight. Real templates use 2 to 4.
pub const MAX_SIZE_ARGUMENT: u64 = 10_000;

/// Why a template produced no text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JinjaError {
    /// A syntax error, or the template raised or failed on its input:
    /// minijinja's message.
    Template(String),
    /// The template ran past a limit.
    Runaway(Runaway),
}

/// The limit a template ran past.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runaway {
    /// Its text is this many bytes, over [`MAX_SOURCE_BYTES`].
    Source(usize),
    /// It used all its fuel ([`FUEL`] in headroom): this much.
    Fuel(u64),
    /// It nested deeper than [`RECURSION_LIMIT`].
    Recursion,
    /// It wrote more than [`MAX_OUTPUT_BYTES`].
    Output,
    /// It was still running after this long ([`DEADLINE`]).
    Time(Duration),
    /// It asked for too much in one step: a size over [`MAX_SIZE_ARGUMENT`]
    /// for a filter or method, or over one of minijinja's own limits.
    Size(String),
}

impl fmt::Display for Runaway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Runaway::Source(n) => write!(
                f,
                "is {n} bytes, over the limit of {MAX_SOURCE_BYTES} bytes"
            ),
            Runaway::Fuel(fuel) => write!(f, "did not finish (ran out of fuel after {fuel} steps)"),
            Runaway::Recursion => write!(
                f,
                "did not finish (nested deeper than {RECURSION_LIMIT} levels)"
            ),
            Runaway::Output => write!(
                f,
                "did not finish (wrote more than {MAX_OUTPUT_BYTES} bytes)"
            ),
            Runaway::Time(limit) => write!(
                f,
                "did not finish (still running after {} s)",
                limit.as_secs_f64()
            ),
            Runaway::Size(what) => write!(f, "did not finish ({what})"),
        }
    }
}

impl fmt::Display for JinjaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JinjaError::Template(msg) => f.write_str(msg),
            JinjaError::Runaway(r) => write!(f, "the template {r}"),
        }
    }
}

impl std::error::Error for JinjaError {}

/// A Jinja environment set up like Hugging Face's `apply_chat_template`
/// (trim_blocks, lstrip_blocks, Python string methods, `raise_exception`,
/// `strftime_now`), holding `src` as template `name`, with the limits above.
///
/// # Errors
/// `src` is over [`MAX_SOURCE_BYTES`], or has a syntax error.
pub fn environment(name: &str, src: &str) -> Result<Environment<'static>, JinjaError> {
    environment_with_fuel(name, src, FUEL)
}

/// [`environment`] with another amount of fuel per render: the fuzz target
/// gives less, so that each endless input costs it milliseconds, not seconds.
///
/// # Errors
/// As [`environment`].
pub fn environment_with_fuel(
    name: &str,
    src: &str,
    fuel: u64,
) -> Result<Environment<'static>, JinjaError> {
    if src.len() > MAX_SOURCE_BYTES {
        return Err(JinjaError::Runaway(Runaway::Source(src.len())));
    }
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_fuel(Some(fuel));
    env.set_recursion_limit(RECURSION_LIMIT);
    // minijinja picks escaping by template name; chat text is never HTML.
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_unknown_method_callback(|state, value, method, args| {
        if method == "format"
            && let Some(spec) = value.as_str()
        {
            check_format(spec, "str.format")?;
        }
        minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
    });
    env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("the template raised: {msg}"),
        ))
    });
    env.add_function("strftime_now", |fmt: String| strftime_now(&fmt));
    cap_size_arguments(&mut env);
    env.add_template_owned(name.to_string(), src.to_string())
        .map_err(|e| classify(e, fuel))?;
    Ok(env)
}

/// Renders template `name` of `env` (made by [`environment`]) for
/// `messages`, with the variables Hugging Face templates expect. Returns the
/// text and the fuel it used.
///
/// # Errors
/// The template raised or failed, or ran past a limit.
pub fn render<M: Serialize>(
    env: &Environment<'static>,
    name: &str,
    messages: &[M],
    tools: Option<&serde_json::Value>,
    add_generation_prompt: bool,
    bos: &str,
    eos: &str,
) -> Result<(String, u64), JinjaError> {
    let fuel = env.fuel().unwrap_or(0);
    let tmpl = env.get_template(name).map_err(|e| classify(e, fuel))?;
    let mut out = Capped::default();
    let result = tmpl.render_captured_to(
        context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => bos,
            eos_token => eos,
            tools => tools.map_or_else(|| Value::from(()), Value::from_serialize),
            documents => Value::from(()),
        },
        &mut out,
    );
    let used = match result {
        Ok(done) => done.state().fuel_levels().map_or(0, |(used, _)| used),
        Err(_) if out.over => return Err(JinjaError::Runaway(Runaway::Output)),
        Err(err) => return Err(classify(err, fuel)),
    };
    String::from_utf8(out.buf)
        .map(|text| (text, used))
        .map_err(|_| JinjaError::Template("the template wrote invalid UTF-8".to_string()))
}

/// [`render`] on a thread of its own, given up after `deadline`
/// ([`DEADLINE`] in headroom): the thread is left to finish on its own (its
/// fuel ends it), and the caller gets an error at once. Callers refuse such a
/// template, and a process that exits takes the thread with it.
///
/// A panic in minijinja (2.24 has one: a negative-step slice of an empty
/// string, `''[::-1]`) is an error too, printed by nobody: the chat draws on
/// the terminal the default panic hook would write to.
///
/// # Errors
/// As [`render`], or [`Runaway::Time`], or minijinja panicked.
pub fn render_in_time<M: Serialize + Send + 'static>(
    env: Arc<Environment<'static>>,
    name: String,
    messages: Vec<M>,
    tools: Option<serde_json::Value>,
    add_generation_prompt: bool,
    (bos, eos): (String, String),
    deadline: Duration,
) -> Result<(String, u64), JinjaError> {
    let (tx, rx) = mpsc::sync_channel(1);
    quiet_render_panics();
    std::thread::Builder::new()
        .name(RENDER_THREAD.into())
        .stack_size(RENDER_STACK_BYTES)
        .spawn(move || {
            let out = panic::catch_unwind(AssertUnwindSafe(|| {
                render(
                    &env,
                    &name,
                    &messages,
                    tools.as_ref(),
                    add_generation_prompt,
                    &bos,
                    &eos,
                )
            }))
            .unwrap_or_else(|payload| {
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(JinjaError::Template(format!(
                    "minijinja failed on this template (its bug): {what}"
                )))
            });
            // Nobody listens after the deadline: nothing to do then.
            let _ = tx.send(out);
        })
        .map_err(|e| JinjaError::Template(format!("cannot start a thread to render: {e}")))?;
    match rx.recv_timeout(deadline) {
        Ok(out) => out,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(JinjaError::Runaway(Runaway::Time(deadline))),
        // Cannot happen: the thread sends before it ends, panic or not.
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(JinjaError::Template(
            "rendering the template stopped without a result".to_string(),
        )),
    }
}

/// The name of the threads [`render_in_time`] renders on.
const RENDER_THREAD: &str = "chat-template";

/// Keeps the panic hook from printing panics of [`RENDER_THREAD`]s, which
/// come back as errors; every other panic is printed as before.
fn quiet_render_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() != Some(RENDER_THREAD) {
                previous(info);
            }
        }));
    });
}

/// The rendered text, refused past [`MAX_OUTPUT_BYTES`].
#[derive(Default)]
struct Capped {
    buf: Vec<u8>,
    over: bool,
}

impl io::Write for Capped {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len().saturating_add(bytes.len()) > MAX_OUTPUT_BYTES {
            self.over = true;
            return Err(io::Error::other("the rendered text is too long"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// minijinja's error as a [`JinjaError`]: a limit it enforces (`fuel`: what
/// the environment had), or the message with its causes on one line.
fn classify(err: Error, fuel: u64) -> JinjaError {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    while let Some(e) = cause {
        if let Some(e) = e.downcast_ref::<Error>() {
            if e.kind() == ErrorKind::OutOfFuel {
                return JinjaError::Runaway(Runaway::Fuel(fuel));
            }
            if e.kind() == ErrorKind::InvalidOperation
                && e.detail() == Some("recursion limit exceeded")
            {
                return JinjaError::Runaway(Runaway::Recursion);
            }
            if let Some(what) = e.detail().and_then(|d| d.strip_prefix(OVERSIZED)) {
                return JinjaError::Runaway(Runaway::Size(what.to_string()));
            }
            if let Some(what) = e.detail().filter(|d| ENGINE_LIMITS.contains(d)) {
                return JinjaError::Runaway(Runaway::Size(what.to_string()));
            }
        }
        cause = e.source();
    }
    let mut msg = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        msg.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    JinjaError::Template(msg)
}

/// minijinja's own size limits, known by their messages: a range over
/// 100,000 items, a repeated string over 100 MB. (Reworded in a later
/// minijinja, they would read as plain template errors; a test below checks
/// the wording.)
const ENGINE_LIMITS: [&str; 2] = [
    "range has too many elements",
    "repeated string is too large",
];

/// Marks the error of a size argument over [`MAX_SIZE_ARGUMENT`], for
/// [`classify`].
const OVERSIZED: &str = "headroom: oversized argument: ";

fn oversized(what: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, format!("{OVERSIZED}{what}"))
}

/// Replaces the built-in filters that allocate in proportion to an integer
/// argument with ones that refuse a size over [`MAX_SIZE_ARGUMENT`] first.
fn cap_size_arguments(env: &mut Environment<'static>) {
    let filters = [
        ("indent", Value::from_function(minijinja::filters::indent)),
        ("tojson", Value::from_function(tojson)),
        ("batch", Value::from_function(minijinja::filters::batch)),
        ("slice", Value::from_function(minijinja::filters::slice)),
        ("format", Value::from_function(minijinja::filters::format)),
    ];
    for (name, builtin) in filters {
        env.add_filter(name, move |state: &State, args: Rest<Value>| {
            // The piped value comes first; it may be any size.
            let mut sizes: Vec<Value> = Vec::new();
            for arg in args.iter().skip(1) {
                if arg.is_kwargs() {
                    sizes.extend(
                        arg.try_iter()
                            .into_iter()
                            .flatten()
                            .filter_map(|k| arg.get_item(&k).ok()),
                    );
                } else {
                    sizes.push(arg.clone());
                }
            }
            for size in sizes {
                // Floats too: minijinja takes 1e9 where it wants an integer.
                if size.kind() == ValueKind::Number
                    && f64::try_from(size.clone()).is_ok_and(|n| n.abs() > MAX_SIZE_ARGUMENT as f64)
                {
                    return Err(oversized(format!(
                        "asked `{name}` for a size of {size}, over {MAX_SIZE_ARGUMENT}"
                    )));
                }
            }
            if name == "format"
                && let Some(spec) = args.first().and_then(Value::as_str)
            {
                check_format(spec, "format")?;
            }
            builtin.call(state, &args)
        });
    }
}

/// `tojson` as Hugging Face's chat templates get it (transformers overrides
/// Jinja's: `json.dumps(x, ensure_ascii=False, indent=indent,
/// separators=separators, sort_keys=sort_keys)`) and llama.cpp's minja
/// writes it: `", "` and `": "` between items (`","` with an indent), keys in
/// the order they came, no HTML escaping. minijinja's own filter writes
/// `{"a":1}` and `\u003c` for `<`, so a tool list or a call's arguments
/// reached the model in a form it was never trained on, and unlike the text
/// llama-server renders. Keyword arguments: `indent`, `ensure_ascii`,
/// `separators` (two strings), `sort_keys`.
fn tojson(value: &Value, args: Rest<Value>) -> Result<Value, Error> {
    let mut indent = args.iter().find(|a| !a.is_kwargs()).cloned();
    let (mut ascii, mut sort, mut separators) = (false, false, None::<(String, String)>);
    if let Some(kwargs) = args.iter().find(|a| a.is_kwargs()) {
        for key in kwargs.try_iter()? {
            let v = kwargs.get_item(&key)?;
            match key.as_str() {
                Some("indent") => indent = Some(v),
                Some("ensure_ascii") => ascii = v.is_true(),
                Some("sort_keys") => sort = v.is_true(),
                Some("separators") => {
                    let parts: Vec<Value> = v.try_iter()?.collect();
                    match (
                        parts.first().and_then(Value::as_str),
                        parts.get(1).and_then(Value::as_str),
                    ) {
                        (Some(item), Some(key)) if parts.len() == 2 => {
                            separators = Some((item.to_string(), key.to_string()));
                        }
                        _ => {
                            return Err(Error::new(
                                ErrorKind::InvalidOperation,
                                "tojson: separators must be two strings",
                            ));
                        }
                    }
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        format!("tojson: unknown keyword argument {key}"),
                    ));
                }
            }
        }
    }
    let indent = match indent.filter(|i| !i.is_none() && !i.is_undefined()) {
        None => None,
        Some(i) => Some(match i.as_str() {
            Some(text) => text.to_string(),
            None => " ".repeat(usize::try_from(i64::try_from(i)?.max(0)).unwrap_or(0)),
        }),
    };
    // Written once per line and level: a long one (a string of a million
    // spaces) would multiply the output inside this one call, before the
    // output cap sees it. Templates indent by 2 or 4.
    if indent.as_ref().is_some_and(|i| i.len() > MAX_TOJSON_INDENT) {
        return Err(oversized(format!(
            "asked `tojson` for an indent over {MAX_TOJSON_INDENT} characters"
        )));
    }
    let (item, key) = separators.unwrap_or_else(|| {
        let item = if indent.is_some() { "," } else { ", " };
        (item.to_string(), ": ".to_string())
    });
    let failed =
        |e: serde_json::Error| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}"));
    let mut out = Vec::new();
    let mut writer = serde_json::Serializer::with_formatter(
        &mut out,
        PyJson {
            indent: indent.as_deref(),
            item: &item,
            key: &key,
            ascii,
            level: 0,
            empty: false,
        },
    );
    if sort {
        // Sorting needs the whole value as JSON first.
        let mut json = serde_json::to_value(value).map_err(failed)?;
        json.sort_all_objects();
        json.serialize(&mut writer).map_err(failed)?;
    } else {
        value.serialize(&mut writer).map_err(failed)?;
    }
    let text = String::from_utf8(out)
        .map_err(|_| Error::new(ErrorKind::InvalidOperation, "tojson: invalid UTF-8"))?;
    Ok(Value::from_safe_string(text))
}

/// The widest `tojson` indent taken.
const MAX_TOJSON_INDENT: usize = 64;

/// Python's `json.dumps` layout for serde_json: the separators, the indent
/// (a newline and the indent per level, empty containers kept as `[]`/`{}`)
/// and `ensure_ascii`'s `\uXXXX` escapes.
struct PyJson<'a> {
    indent: Option<&'a str>,
    item: &'a str,
    key: &'a str,
    ascii: bool,
    level: usize,
    /// The container just opened has had no element yet.
    empty: bool,
}

impl PyJson<'_> {
    fn newline<W: ?Sized + io::Write>(&self, w: &mut W) -> io::Result<()> {
        if let Some(indent) = self.indent {
            w.write_all(b"\n")?;
            for _ in 0..self.level {
                w.write_all(indent.as_bytes())?;
            }
        }
        Ok(())
    }

    fn open<W: ?Sized + io::Write>(&mut self, w: &mut W, c: &[u8]) -> io::Result<()> {
        self.level += 1;
        self.empty = true;
        w.write_all(c)
    }

    fn close<W: ?Sized + io::Write>(&mut self, w: &mut W, c: &[u8]) -> io::Result<()> {
        self.level -= 1;
        if !self.empty {
            self.newline(w)?;
        }
        self.empty = false;
        w.write_all(c)
    }

    fn element<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if !first {
            w.write_all(self.item.as_bytes())?;
        }
        self.empty = false;
        self.newline(w)
    }
}

impl serde_json::ser::Formatter for PyJson<'_> {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.element(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.element(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(self.key.as_bytes())
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        if !self.ascii || fragment.is_ascii() {
            return w.write_all(fragment.as_bytes());
        }
        let mut units = [0u16; 2];
        for c in fragment.chars() {
            if c.is_ascii() {
                w.write_all(&[c as u8])?;
            } else {
                for u in c.encode_utf16(&mut units) {
                    write!(w, "\\u{u:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// Refuses a `format` string whose widths or precisions (the digits in a
/// `%…` or `{…}` field) are over [`MAX_SIZE_ARGUMENT`]: `'%999999999s'`
/// pads to that many bytes in one call.
fn check_format(spec: &str, what: &str) -> Result<(), Error> {
    // The character that opened the field being read, if any; `(` for a
    // printf mapping key, `%(name)s`, whose name may hold any letter.
    let mut field: Option<char> = None;
    let mut number = 0u64;
    for c in spec.chars() {
        field = match (field, c) {
            (None, '%' | '{') => Some(c),
            // "%%" and "{{" are the characters themselves.
            (Some('%'), '%') | (Some('{'), '{' | '}') => None,
            (Some('%'), '(') => Some('('),
            (Some('('), ')') => Some('%'),
            // The conversion type ends a printf field.
            (Some('%'), c) if c.is_ascii_alphabetic() => None,
            (f, _) => f,
        };
        match c.to_digit(10) {
            Some(d) if matches!(field, Some('%' | '{')) => {
                number = number.saturating_mul(10).saturating_add(u64::from(d));
                if number > MAX_SIZE_ARGUMENT {
                    return Err(oversized(format!(
                        "a `{what}` width over {MAX_SIZE_ARGUMENT}"
                    )));
                }
            }
            _ => number = 0,
        }
    }
    Ok(())
}

/// Python's `datetime.now().strftime(fmt)`, which Llama 3.1 and others call
/// for "Today Date".
#[cfg(unix)]
fn strftime_now(fmt: &str) -> Result<String, Error> {
    let bad = |what: &str| Error::new(ErrorKind::InvalidOperation, what.to_string());
    let c_fmt = CString::new(fmt).map_err(|_| bad("strftime_now: format contains a NUL byte"))?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let now = libc::time_t::try_from(secs).unwrap_or(0);
    // SAFETY: `tm` is plain integers and one pointer, for which zero (null)
    // is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals; localtime_r writes only `tm`
    // and returns null on failure.
    if unsafe { libc::localtime_r(&now, &mut tm) }.is_null() {
        return Err(bad("strftime_now: no local time"));
    }
    for size in [256usize, 4096] {
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` has `size` bytes; `c_fmt` is NUL-terminated; `tm` was
        // filled by localtime_r. strftime returns 0 when the result does not fit.
        let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), size, c_fmt.as_ptr(), &tm) };
        if n > 0 || fmt.is_empty() {
            buf.truncate(n);
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
    }
    Err(bad("strftime_now: result too long or empty"))
}

#[cfg(not(unix))]
fn strftime_now(_fmt: &str) -> Result<String, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        "strftime_now is only available on Unix".to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(src: &str) -> Result<String, JinjaError> {
        let env = environment("t", src)?;
        let messages = [[("role", "user"), ("content", "Hello")]
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>()];
        render(&env, "t", &messages, None, true, "<s>", "</s>").map(|(text, _)| text)
    }

    /// What Python's `json.dumps` (transformers' `tojson`) prints for the
    /// same calls, checked against CPython 3.11 by hand.
    #[test]
    fn tojson_writes_what_hugging_face_s_tojson_writes() {
        for (src, want) in [
            (
                r#"{{ {"type": "function", "b": [1, 2.5, "<é>"], "a": {}} | tojson }}"#,
                r#"{"type": "function", "b": [1, 2.5, "<é>"], "a": {}}"#,
            ),
            (
                r#"{{ {"b": [1, []], "a": "x"} | tojson(indent=2) }}"#,
                "{\n  \"b\": [\n    1,\n    []\n  ],\n  \"a\": \"x\"\n}",
            ),
            (
                r#"{{ {"b": 1, "a": "é\n"} | tojson(sort_keys=true, ensure_ascii=true) }}"#,
                r#"{"a": "\u00e9\n", "b": 1}"#,
            ),
            (
                r#"{{ [1, {"a": 2}] | tojson(separators=(",", ":")) }}"#,
                r#"[1,{"a":2}]"#,
            ),
            (
                r#"{{ "😀" | tojson(ensure_ascii=true) }}"#,
                r#""\ud83d\ude00""#,
            ),
            ("{{ none | tojson }}", "null"),
        ] {
            assert_eq!(run(src).as_deref(), Ok(want), "{src}");
        }
        assert!(run(r#"{{ 1 | tojson(colour="red") }}"#).is_err());
        // A long indent is refused before it multiplies the output.
        assert!(run(r#"{{ [1, 2] | tojson(indent=" " * 1000) }}"#).is_err());
        assert!(run("{{ [1, 2] | tojson(indent=65) }}").is_err());
    }

    #[test]
    fn recursion_stops_cleanly_on_a_spawned_threads_stack() {
        // 2 MiB, the default of std::thread::spawn: the limit must stop the
        // deepest recursion before the stack ends, or the process aborts.
        let deep = "{% macro f() %}{% for a in [1] %}{% for b in [1] %}{% with x = 1 %}\
                    {{ [f()] | map('upper') | join }}{% endwith %}{% endfor %}{% endfor %}{% endmacro %}{{ f() }}";
        let out = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || run(deep))
            .expect("thread")
            .join()
            .expect("no stack overflow");
        assert_eq!(out, Err(JinjaError::Runaway(Runaway::Recursion)));
    }

    #[test]
    fn minijinja_limits_keep_their_wording() {
        for (src, what) in [
            (
                "{{ range(100001) | length }}",
                "range has too many elements",
            ),
            ("{{ 'ab' * 60000000 }}", "repeated string is too large"),
        ] {
            assert_eq!(
                run(src),
                Err(JinjaError::Runaway(Runaway::Size(what.to_string()))),
                "{src}"
            );
        }
    }

    #[test]
    fn size_arguments_are_capped_and_real_ones_work() {
        assert_eq!(
            run("{{ 'a\nb' | indent(4, first=true) }}").as_deref(),
            Ok("    a\n    b")
        );
        assert_eq!(
            run("{{ 'a\nb' | indent(width=2) }}").as_deref(),
            Ok("a\n  b")
        );
        assert_eq!(
            run("{{ '%5s|%.2f' | format('a', 1.5) }}").as_deref(),
            Ok("    a|1.50")
        );
        assert_eq!(
            run("{{ '{:>4}|{}'.format('a', 2) }}").as_deref(),
            Ok("   a|2")
        );
        assert_eq!(
            run("{{ [1, 2, 3] | batch(2) | list | length }}").as_deref(),
            Ok("2")
        );
        assert_eq!(run("{{ 100000000 | tojson }}").as_deref(), Ok("100000000"));
        // Numbers outside the fields are text, not widths.
        assert_eq!(
            run("{{ '20240%% of %(n)s, 123456' | format(n='x') }}").as_deref(),
            Ok("20240% of x, 123456")
        );
        for src in [
            "{{ 'a\nb' | indent(width=100000) }}",
            "{{ 'a\nb' | indent(1e9) }}",
            "{{ [1] | slice(1000000000000) | list }}",
            "{{ '%.99999f' | format(1.0) }}",
            "{{ '{0:99999}'.format('a') }}",
            "{{ '%(name)99999s' | format(name='a') }}",
        ] {
            assert!(
                matches!(run(src), Err(JinjaError::Runaway(Runaway::Size(_)))),
                "{src}: {:?}",
                run(src)
            );
        }
    }

    #[test]
    fn a_slow_render_is_given_up_at_the_deadline() {
        // Three 100 MB strings: well over a tenth of a second, for a few fuel.
        let slow = "{% for i in range(3) %}{% set x = 'a' * (100000000 - i) %}{% endfor %}";
        let env = Arc::new(environment("slow", slow).expect("parses"));
        let t0 = std::time::Instant::now();
        let out = render_in_time(
            env,
            "slow".into(),
            Vec::<()>::new(),
            None,
            true,
            (String::new(), String::new()),
            Duration::from_millis(50),
        );
        assert_eq!(
            out,
            Err(JinjaError::Runaway(Runaway::Time(Duration::from_millis(
                50
            ))))
        );
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        let fine = Arc::new(environment("fine", "{{ messages | length }}").expect("parses"));
        let out = render_in_time(
            fine,
            "fine".into(),
            vec![1, 2],
            None,
            true,
            (String::new(), String::new()),
            DEADLINE,
        );
        assert_eq!(out.map(|(text, _)| text).as_deref(), Ok("2"));
    }

    #[test]
    fn a_panic_in_minijinja_is_an_error() {
        // minijinja 2.24 indexes past the end reversing an empty string.
        let env = Arc::new(environment("rev", "{{ ''[::-1] }}").expect("parses"));
        let out = render_in_time(
            env,
            "rev".into(),
            Vec::<()>::new(),
            None,
            true,
            (String::new(), String::new()),
            DEADLINE,
        );
        assert!(
            matches!(&out, Err(JinjaError::Template(m)) if m.starts_with("minijinja failed"))
                || out.is_ok(),
            "{out:?}"
        );
    }

    #[test]
    fn oversized_sources_are_refused() {
        let big = "x".repeat(MAX_SOURCE_BYTES + 1);
        assert_eq!(
            environment("big", &big).err(),
            Some(JinjaError::Runaway(Runaway::Source(MAX_SOURCE_BYTES + 1)))
        );
    }

    #[test]
    fn strftime_now_formats_the_date() {
        let year = strftime_now("%Y").expect("formats");
        assert_eq!(year.len(), 4);
        assert!(year.chars().all(|c| c.is_ascii_digit()), "{year}");
        assert_eq!(strftime_now("").expect("empty"), "");
        assert!(strftime_now("a\0b").is_err());
    }
}

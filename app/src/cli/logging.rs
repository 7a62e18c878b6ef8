//! Logging: headroom's own lines and llama.cpp's log, on stderr at the level
//! `-v` asks for, in the same `headroom: warning: …` shape as every other
//! warning.

/// Log to stderr at the level `-v` asks for (`RUST_LOG` wins when set), and
/// route llama.cpp's own log into the same place: quiet by default (its
/// errors reach the user inside headroom's one-line error, see
/// [`crate::llama::log`]), `-v` shows its info lines, `-vv` everything.
pub fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn,llama-cpp-2=off,hf_hub=off,xet_client=off,xet_data=off,xet_runtime=off",
        1 => "info",
        _ => "debug",
    };
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    // By default only warnings get through: they read like headroom's other
    // lines. With -v, the full log format (time, level, target).
    let print = if verbose == 0 && std::env::var_os("RUST_LOG").is_none() {
        layer
            .event_format(AsWarning)
            .with_filter(Recheck(filter))
            .boxed()
    } else {
        layer.with_filter(Recheck(filter)).boxed()
    };
    let _ = tracing_subscriber::registry()
        .with(print)
        .with(crate::llama::log::Capture)
        .try_init();
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
}

/// Formats a log event as `headroom: warning: MESSAGE`, like headroom's own
/// warnings, for the default level (where only warnings are shown). Not
/// `headroom: error:`: that line is the one fatal error, printed by `main`.
struct AsWarning;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for AsWarning
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "headroom: warning: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// An [`EnvFilter`](tracing_subscriber::EnvFilter) asked again for every
/// event. llama-cpp-2 hands llama.cpp's log lines to the dispatcher from
/// callsites of its own (`Dispatch::event`), without the `enabled` call in
/// which a per-layer filter decides; the filter then went by whatever its
/// last decision on that thread was, and llama.cpp's INFO lines leaked into
/// the output at the default level now and then.
struct Recheck(tracing_subscriber::EnvFilter);

impl<S> tracing_subscriber::layer::Filter<S> for Recheck
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        cx: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        tracing_subscriber::layer::Filter::<S>::enabled(&self.0, meta, cx)
    }

    fn callsite_enabled(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing_subscriber::layer::Filter::<S>::callsite_enabled(&self.0, meta)
    }

    fn event_enabled(
        &self,
        event: &tracing::Event<'_>,
        cx: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        tracing_subscriber::layer::Filter::<S>::enabled(&self.0, event.metadata(), cx)
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        tracing_subscriber::layer::Filter::<S>::max_level_hint(&self.0)
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        cx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        tracing_subscriber::layer::Filter::<S>::on_new_span(&self.0, attrs, id, cx);
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        cx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        tracing_subscriber::layer::Filter::<S>::on_record(&self.0, id, values, cx);
    }

    fn on_enter(&self, id: &tracing::span::Id, cx: tracing_subscriber::layer::Context<'_, S>) {
        tracing_subscriber::layer::Filter::<S>::on_enter(&self.0, id, cx);
    }

    fn on_exit(&self, id: &tracing::span::Id, cx: tracing_subscriber::layer::Context<'_, S>) {
        tracing_subscriber::layer::Filter::<S>::on_exit(&self.0, id, cx);
    }

    fn on_close(&self, id: tracing::span::Id, cx: tracing_subscriber::layer::Context<'_, S>) {
        tracing_subscriber::layer::Filter::<S>::on_close(&self.0, id, cx);
    }
}

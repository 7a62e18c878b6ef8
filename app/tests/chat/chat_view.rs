//! The chat's main screens at 80×24, drawn by the real view from states
//! reached through the real update function, on ratatui's TestBackend and
//! compared with insta snapshots (`app/tests/snapshots/`): empty chat, a reply
//! streaming, the offload warning banner while loading, context nearly full,
//! the help overlay and a refused plan. Plus: `NO_COLOR` draws no colour.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use headroom::runner::StopReason;
use headroom::tui::state::{GpuPlan, Usage};
use headroom::tui::{App, Event, Mode, ModelEvent, PlanInfo, Theme, view};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn cpu_plan() -> PlanInfo {
    PlanInfo {
        model: "gemma-3-270m-q4_k_m".into(),
        quant: "Q4_K_M".into(),
        n_ctx: 4096,
        n_gpu_layers: 0,
        ram_budget: 22 * GIB,
        ram_planned: 346 * MIB,
        gpus: Vec::new(),
        est_decode_tps: 81.7,
        summary: "fits — Q4_K_M, 18 layers on CPU, context 4096, est. 81.7 tok/s".into(),
        warnings: Vec::new(),
    }
}

fn usage() -> Event {
    Event::Usage(Usage {
        rss: 371 * MIB,
        peak: 380 * MIB,
        vram: Vec::new(),
    })
}

fn loaded(app: &mut App, n_ctx: u32) {
    app.update(Event::Model(ModelEvent::Loaded {
        n_ctx,
        template: "assets/templates/gemma.jinja (fallback for gemma3)".into(),
        load_s: 0.5,
    }));
}

fn new_app(plan: PlanInfo) -> App {
    let mut app = App::new(plan, Mode::Loading(0.0), (80, 24), Theme::new(true));
    app.update(usage());
    app
}

fn key(app: &mut App, code: KeyCode) {
    app.update(Event::Key(
        KeyEvent::new(code, KeyModifiers::NONE),
        Instant::now(),
    ));
}

fn say(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
    key(app, KeyCode::Enter);
}

fn text(app: &mut App, t: &str, ctx_used: usize) {
    app.update(Event::Model(ModelEvent::Text {
        text: t.into(),
        ctx_used,
        tokens_per_s: 42.5,
    }));
}

fn done(app: &mut App, ctx_used: usize) {
    app.update(Event::Model(ModelEvent::Done {
        reason: StopReason::EndOfGeneration,
        ctx_used,
        tokens: 40,
        tokens_per_s: 41.0,
    }));
}

fn draw(app: &App) -> Terminal<TestBackend> {
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("test terminal");
    terminal.draw(|f| view::render(app, f)).expect("drawn");
    terminal
}

fn screen(app: &App) -> String {
    draw(app).backend().to_string()
}

#[test]
fn empty_chat() {
    let mut app = new_app(cpu_plan());
    loaded(&mut app, 4096);
    insta::assert_snapshot!("empty_chat", screen(&app));
}

#[test]
fn reply_streaming() {
    let mut app = new_app(cpu_plan());
    loaded(&mut app, 4096);
    say(&mut app, "Show me a Rust hello world");
    text(
        &mut app,
        "Here is **the** classic:\n\n```rust\nfn main() {\n",
        60,
    );
    text(
        &mut app,
        "    println!(\"Hello, world!\");\n}\n```\n\nRun it with `cargo run`. The",
        85,
    );
    // Typing goes on while the reply streams.
    for c in "thanks".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    assert_eq!(app.mode, Mode::Streaming);
    insta::assert_snapshot!("reply_streaming", screen(&app));
}

#[test]
fn offload_warning_banner_while_loading() {
    let plan = PlanInfo {
        model: "llama-3-8b-q8_0".into(),
        quant: "Q8_0".into(),
        n_ctx: 8192,
        n_gpu_layers: 27,
        ram_budget: 12 * GIB,
        ram_planned: 3 * GIB,
        gpus: vec![GpuPlan {
            name: "NVIDIA GeForce RTX 4060".into(),
            planned: 7 * GIB,
            budget: 7 * GIB + 512 * MIB,
        }],
        est_decode_tps: 9.8,
        summary: "fits with offload — Q8_0, 27/32 layers on GPU, context 8192, est. 9.8 tok/s"
            .into(),
        warnings: vec![
            "offload: 5 of 32 layers in RAM, est. 10 tok/s (33 tok/s fully on GPU)".into(),
        ],
    };
    let mut app = new_app(plan);
    app.update(Event::Usage(Usage {
        rss: 2 * GIB,
        peak: 2 * GIB,
        vram: vec![5 * GIB],
    }));
    app.update(Event::Model(ModelEvent::Progress(0.42)));
    insta::assert_snapshot!("offload_warning_banner", screen(&app));
}

#[test]
fn context_nearly_full() {
    let mut app = new_app(cpu_plan());
    loaded(&mut app, 4096);
    say(&mut app, "Summarise the attached log");
    text(
        &mut app,
        "The log shows three restarts, each after the cache grew past its limit.",
        2900,
    );
    done(&mut app, 2950);
    say(&mut app, "And the fourth?");
    text(&mut app, "The fourth restart came from the watchdog.", 3500);
    done(&mut app, 3510);
    assert!(app.ctx.fill() > 0.8);
    insta::assert_snapshot!("context_nearly_full", screen(&app));
}

#[test]
fn context_full_drops_the_oldest_turns() {
    let mut app = new_app(cpu_plan());
    loaded(&mut app, 4096);
    app.system = Some("You are terse.".into());
    say(&mut app, "first question");
    text(&mut app, "first answer", 3000);
    done(&mut app, 3010);
    say(&mut app, "second question");
    app.update(Event::Model(ModelEvent::Trimmed(2)));
    text(&mut app, "second answer", 1200);
    done(&mut app, 1210);
    insta::assert_snapshot!("context_full_dropped", screen(&app));
}

#[test]
fn help() {
    let mut app = new_app(cpu_plan());
    loaded(&mut app, 4096);
    say(&mut app, "/help");
    assert!(app.help);
    insta::assert_snapshot!("help", screen(&app));
}

#[test]
fn refused_plan_with_the_nearest_that_fits() {
    let mut plan = cpu_plan();
    plan.summary = "does not fit — Q4_K_M, 18 layers on CPU, context 32768, est. 81.7 tok/s".into();
    let mode = Mode::Refused {
        reason: "RAM: needs 2.31 GiB resident, has 1.90 GiB".into(),
        nearest: Some("-c 8192 (fits, context 8192, peak RAM 1.20 GiB)".into()),
    };
    let mut app = App::new(plan, mode, (80, 24), Theme::new(true));
    app.update(usage());
    insta::assert_snapshot!("refused", screen(&app));
}

#[test]
fn no_color_draws_no_colour() {
    let mut app = App::new(cpu_plan(), Mode::Loading(0.0), (80, 24), Theme::new(false));
    app.update(usage());
    loaded(&mut app, 4096);
    say(&mut app, "hello");
    text(&mut app, "**hi** `there`", 3800);
    let t = draw(&app);
    let buf = t.backend().buffer();
    for cell in &buf.content {
        assert_eq!(cell.fg, Color::Reset, "{cell:?}");
        assert_eq!(cell.bg, Color::Reset, "{cell:?}");
    }
    // With colour, the same screen has some.
    app.theme = Theme::new(true);
    let t = draw(&app);
    assert!(
        t.backend()
            .buffer()
            .content
            .iter()
            .any(|c| c.fg != Color::Reset)
    );
}

#[test]
fn an_offloaded_plan_brings_its_warning_into_the_banner() {
    use headroom_planner::plan::Settings;
    use headroom_planner::solve::{self, Build};
    use headroom_planner::synth::{self, Mix, Shape};
    let header = synth::build(Shape::Llama8B, Mix::Q8_0).expect("synthetic model");
    let profile = headroom_planner::profile::profile(&header).expect("profile");
    let hw_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../planner/tests/fixtures/hw/gpu-8g-ram-16g.toml");
    let hw = headroom_planner::hw::load_profile(&hw_path).expect("hw fixture");
    let plan = solve::plan(
        &profile,
        "llama-3-8b-q8_0.gguf",
        &Settings::default(),
        &hw,
        Build { gpu: true },
    );
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.code == headroom_planner::plan::WarningCode::OffloadSlow),
        "{:?}",
        plan.warnings
    );
    let info = PlanInfo::from_plan(&plan, vec!["CUDA0: llama.cpp accounts more".into()]);
    assert_eq!(info.model, "llama-3-8b-q8_0");
    assert_eq!(info.gpus.len(), 1);
    let banner: Vec<String> = info.banner().into_iter().map(|n| n.text).collect();
    assert!(
        banner.iter().any(|l| l.starts_with("offload:")),
        "{banner:?}"
    );
    assert!(
        banner.iter().any(|l| l.contains("llama.cpp accounts more")),
        "{banner:?}"
    );
}

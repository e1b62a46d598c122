#!/usr/bin/env node
// render.js: a composition renderer for RenderMac's command runner, built on
// timecut (BSD-3-Clause), which records a web page's animation frame by frame
// in headless Chromium with virtual time and encodes the frames with ffmpeg.
//
//   node render.js PARAMS_JSON_FILE OUTPUT_MP4
//
// It speaks the command runner's protocol (docs/SPEC.md, "Command runner"):
// params arrive as a JSON object in a file, the MP4 goes to OUTPUT_MP4,
// progress is printed as "PROGRESS <done>/<total>" lines on stderr, and the
// exit status is 0 only when the output exists. The browser is started in
// this process's group (puppeteer's own launcher puts it in a new session),
// so the agent's kill of the group reaches it.
//
// Params (strings or numbers): title (text, at most 64 characters,
// default "RenderMac"), background (#rrggbb, default #1d3557), duration_s
// (1..30, default 2), fps (1..30, default 15), width and height (even,
// 64..1920, default 320x180).
//
// Environment: CHROMIUM_PATH (default /usr/bin/chromium), FFMPEG_PATH
// (default ffmpeg on PATH).
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const puppeteer = require('puppeteer');
const timecut = require('timecut');

function fail(msg) {
  console.error('render.js: ' + msg);
  process.exit(2);
}

function intParam(p, name, lo, hi, def, even) {
  if (p[name] === undefined) return def;
  const v = Number(p[name]);
  if (!Number.isInteger(v) || v < lo || v > hi || (even && v % 2)) {
    fail(`param ${name}: must be ${even ? 'an even' : 'an'} integer ${lo}..${hi}, got ${JSON.stringify(p[name])}`);
  }
  return v;
}

function readParams(file) {
  const p = JSON.parse(fs.readFileSync(file, 'utf8'));
  const known = ['title', 'background', 'duration_s', 'fps', 'width', 'height'];
  for (const k of Object.keys(p).sort()) {
    if (!known.includes(k)) fail(`param ${k}: unknown (allowed: ${known.join(', ')})`);
  }
  const title = String(p.title === undefined ? 'RenderMac' : p.title);
  if (title.length > 64) fail('param title: at most 64 characters');
  const background = String(p.background === undefined ? '#1d3557' : p.background);
  if (!/^#[0-9a-fA-F]{6}$/.test(background)) fail('param background: must be #rrggbb');
  return {
    title, background,
    duration_s: intParam(p, 'duration_s', 1, 30, 2),
    fps: intParam(p, 'fps', 1, 30, 15),
    width: intParam(p, 'width', 64, 1920, 320, true),
    height: intParam(p, 'height', 64, 1920, 180, true),
  };
}

// launchInGroup starts Chromium as a plain child (same process group) and
// connects puppeteer to it over its DevTools WebSocket.
// Chromium puts its singleton socket in TMPDIR, and a Unix socket's path is
// limited to about 107 bytes, so under a deep attempt dir it gets a short
// temporary dir of its own, removed when this process exits.
function launchInGroup(executablePath, userDataDir) {
  let chromeTmp = os.tmpdir();
  if (chromeTmp.length > 60) {
    chromeTmp = fs.mkdtempSync('/tmp/rmc-');
    process.on('exit', () => fs.rmSync(chromeTmp, { recursive: true, force: true }));
  }
  const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
    '--no-first-run', '--no-default-browser-check', '--mute-audio',
    '--remote-debugging-port=0', '--user-data-dir=' + userDataDir, 'about:blank'];
  const proc = spawn(executablePath, args, {
    stdio: ['ignore', 'ignore', 'pipe'], env: Object.assign({}, process.env, { TMPDIR: chromeTmp }),
  });
  process.on('exit', () => { try { proc.kill('SIGKILL'); } catch (e) { /* gone */ } });
  return new Promise((resolve, reject) => {
    let seen = '';
    proc.on('error', (err) => reject(new Error(`start ${executablePath}: ${err.message}`)));
    proc.on('exit', (code, sig) => reject(new Error(`chromium exited (${code === null ? sig : code}): ${seen.slice(-500)}`)));
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => {
      seen += d;
      const m = seen.match(/DevTools listening on (ws:\/\/\S+)/);
      if (m) {
        proc.stderr.removeAllListeners('data');
        proc.stderr.resume();
        resolve(puppeteer.connect({ browserWSEndpoint: m[1] }).then((browser) => ({ browser, proc })));
      }
    });
  });
}

// launch starts Chromium, and once more if it died before it listened:
// Debian's chromium now and then crashes at start (SIGSEGV before its
// DevTools line) on a loaded host; a render that never started is safe to
// start again, and a second crash is the job's failure.
async function launch(executablePath, tmp) {
  try {
    return await launchInGroup(executablePath, path.join(tmp, 'profile'));
  } catch (e) {
    if (!e.message.startsWith('chromium exited')) throw e;
    console.error(`render.js: ${e.message.split('\n')[0]}; starting it once more`);
    return launchInGroup(executablePath, path.join(tmp, 'profile-2'));
  }
}

async function main() {
  const [paramsFile, output] = process.argv.slice(2);
  if (!paramsFile || !output) fail('usage: render.js PARAMS_JSON_FILE OUTPUT_MP4');
  const p = readParams(paramsFile);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'render-'));
  const { browser, proc } = await launch(process.env.CHROMIUM_PATH || '/usr/bin/chromium', tmp);
  const url = 'file://' + path.join(__dirname, 'composition.html') + '#' +
    encodeURIComponent(JSON.stringify({ title: p.title, background: p.background, duration_s: p.duration_s }));
  await timecut({
    browser, url, output, fps: p.fps, duration: p.duration_s,
    viewport: { width: p.width, height: p.height },
    ffmpegPath: process.env.FFMPEG_PATH || 'ffmpeg',
    pipeMode: true, screenshotType: 'png', pixFmt: 'yuv420p', tempDir: tmp,
    outputOptions: ['-c:v', 'libx264', '-preset', 'ultrafast', '-crf', '28', '-movflags', '+faststart'],
    // Not quiet: timecut copies ffmpeg's log to stdout, which the agent
    // keeps the tail of for a failure message; timesnap's per-frame chatter
    // goes nowhere (progress lines say the same).
    quiet: false,
    logger: () => {},
    preparePageForScreenshot: (page, n, total) => { console.error(`PROGRESS ${n}/${total}`); },
  });
  // timecut does not check ffmpeg's exit status: the file is the proof.
  let size = 0;
  try { size = fs.statSync(output).size; } catch (e) { /* missing */ }
  if (size === 0) {
    fail('ffmpeg wrote no output (its log is above)');
  }
  // timecut closed the browser; it still writes its profile while it shuts
  // down, so wait for it (5 s at most) before removing the temp dir.
  if (proc.exitCode === null && proc.signalCode === null) {
    await new Promise((resolve) => {
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      proc.once('exit', () => { clearTimeout(timer); resolve(); });
    });
  }
  try {
    fs.rmSync(tmp, { recursive: true, force: true });
  } catch (err) {
    // The output is done; a leftover temp dir is not a failed render (the
    // agent removes its scratch dir, TMPDIR, after the job anyway).
    console.error(`render.js: could not remove ${tmp}: ${err.message}`);
  }
  console.error(`render.js: wrote ${output} (${size} bytes)`);
}

// The agent stops a job with SIGTERM to the group (then SIGKILL): exit
// through the 'exit' handlers, which kill the browser and remove temp dirs.
process.on('SIGTERM', () => process.exit(143));

main().then(() => process.exit(0), (err) => fail(String(err && err.stack || err)));

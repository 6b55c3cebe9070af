// The backdrop workspace: the TrueDepth sample on a portrait photo or a colour + depth clip.
import { api, query, followJob, seconds, showError, showBlob, loadSliderSettings } from './api.js';

export class BackdropWorkspace {
  constructor(root) {
    this.root = root;
    this.q = (id) => root.querySelector(`[data-testid=${id}]`);
    this.session = null;
    this.frames = 1;
    this.playing = false;
    this.busy = false;
    this.again = false;
    for (const name of ['cutoffOffset', 'blur', 'gamma']) {
      const input = this.q(`${name}-slider`);
      input.addEventListener('input', () => {
        root.querySelector(`output[data-for=${name}]`).textContent = input.value;
        this.render();
      });
    }
    this.settingsLoaded = this.loadSettings();
    this.q('background-select').addEventListener('change', () => this.render());
    this.q('frame-slider').addEventListener('input', () => this.render());
    this.q('open-clip').addEventListener('click', () => this.openClip());
    this.q('play-button').addEventListener('click', () => this.togglePlay());
    this.q('backdrop-export').addEventListener('click', () => this.export());
  }

  /** Sets each slider's range, step and default from the library's settings. */
  async loadSettings() {
    try {
      await loadSliderSettings('/api/backdrop/settings', this.q, (field, value) => {
        this.root.querySelector(`output[data-for=${field}]`).textContent = value;
      });
    } catch (e) { showError(e.message); }
  }

  /** Fills the background and clip choices from the file list. */
  updateChoices(files) {
    const bg = this.q('background-select'), keep = bg.value;
    bg.replaceChildren(new Option('black', ''));
    for (const e of files.entries.filter((x) => x.kind === 'image' || x.kind === 'depth')) {
      bg.append(new Option(e.path, `${e.root}:${e.path}`));
    }
    bg.value = [...bg.options].some((o) => o.value === keep) ? keep : '';
    for (const id of ['clip-color', 'clip-depth']) {
      const sel = this.q(id), was = sel.value;
      sel.replaceChildren();
      for (const e of files.entries.filter((x) => x.kind === 'video' || x.kind === 'burst')) {
        sel.append(new Option(e.path === '.' ? files.roots[e.root].name : e.path, `${e.root}:${e.path}`));
      }
      if ([...sel.options].some((o) => o.value === was)) sel.value = was;
    }
  }

  useBackground(entry) {
    this.q('background-select').value = `${entry.root}:${entry.path}`;
    this.render();
  }

  static ref(value) {
    const i = value.indexOf(':');
    return { root: Number(value.slice(0, i)), path: value.slice(i + 1) };
  }

  async openPhoto(entry) {
    const body = { photo: { root: entry.root, path: entry.path } };
    await this.opened(await api('/api/backdrop/open', { method: 'POST', body }));
  }

  async openClip() {
    showError(null);
    const c = this.q('clip-color').value, d = this.q('clip-depth').value;
    if (!c || !d) { showError('choose a colour clip and a depth clip (videos or folders of frames)'); return; }
    try {
      const body = { color: BackdropWorkspace.ref(c), depth: BackdropWorkspace.ref(d) };
      await this.opened(await api('/api/backdrop/open', { method: 'POST', body }));
    } catch (err) { showError(err.message); }
  }

  async opened(o) {
    this.session = o.session;
    this.frames = o.frames;
    this.fps = o.frames_per_second;
    const slider = this.q('frame-slider');
    slider.max = String(o.frames - 1);
    slider.value = '0';
    this.q('play-button').disabled = o.frames < 2;
    this.q('backdrop-export').disabled = false;
    const notes = [];
    if (o.truncated) notes.push(`the first ${o.frames} frames are shown; the export takes them all`);
    if (o.relative_accuracy) notes.push('the depth has relative accuracy: the cutoff offset in metres is approximate');
    if (!o.face_cascade) {
      notes.push('no face cascade (apt-get install opencv-data): the nearest large depth region is the subject');
    }
    this.root.querySelector('.title').textContent = `${o.name}: ${o.width}×${o.height}, ${o.frames} frame(s)`;
    this.q('backdrop-info').textContent = notes.join('; ');
    await this.render();
  }

  params() {
    const p = {};
    for (const name of ['cutoffOffset', 'blur', 'gamma', 'frame']) p[name] = this.q(`${name}-slider`).value;
    const bg = this.q('background-select').value;
    if (bg) { const r = BackdropWorkspace.ref(bg); p.bgRoot = r.root; p.bgPath = r.path; }
    return p;
  }

  /** Composite and mask of the current frame; while one is being made, only the newest setting waits. */
  async render() {
    if (!this.session) return;
    if (this.busy) { this.again = true; return; }
    this.busy = true;
    try {
      // The sliders hold the library's defaults only once its settings have arrived.
      await this.settingsLoaded;
      const p = this.params();
      const get = (view) => api(`/api/backdrop/${this.session}/render?${query({ ...p, view })}`, { raw: true });
      const [composite, mask] = await Promise.all([get('composite'), get('mask')]);
      await Promise.all([
        showBlob(this.q('backdrop-image'), await composite.blob()),
        showBlob(this.q('backdrop-mask'), await mask.blob()),
      ]);
      const facts = composite.headers.get('X-Backdrop') || '';
      this.q('backdrop-progress').textContent = `${facts} · ${composite.headers.get('X-Render-Ms')} ms`;
      showError(null);
    } catch (err) {
      showError(err.message);
      this.playing = false;
    } finally {
      this.busy = false;
    }
    if (this.again) { this.again = false; await this.render(); }
  }

  async togglePlay() {
    this.playing = !this.playing;
    this.q('play-button').textContent = this.playing ? 'Pause' : 'Play';
    const slider = this.q('frame-slider');
    while (this.playing) {
      const started = performance.now();
      slider.value = String((Number(slider.value) + 1) % this.frames);
      await this.render();
      const wait = 1000 / (this.fps || 30) - (performance.now() - started);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    this.q('play-button').textContent = 'Play';
  }

  async export() {
    showError(null);
    const link = this.q('backdrop-download');
    link.classList.add('disabled');
    this.q('backdrop-export').disabled = true;
    try {
      const p = this.params();
      delete p.frame;
      const { job } = await api(`/api/backdrop/${this.session}/export?${query(p)}`, { method: 'POST' });
      const end = await followJob(job, (type, e) => {
        if (type === 'progress') {
          const total = e.total ? `/${e.total}` : '', left = e.remaining ? `, ${seconds(e.remaining)} left` : '';
          this.q('backdrop-progress').textContent = `export: ${e.done}${total} frames${left}`;
        }
      });
      if (end.type === 'done') {
        link.href = `/api/jobs/${job}/download`;
        link.classList.remove('disabled');
        this.q('backdrop-progress').textContent = 'export ready';
      } else showError(end.data.message || end.type);
    } catch (err) { showError(err.message); } finally { this.q('backdrop-export').disabled = false; }
  }
}

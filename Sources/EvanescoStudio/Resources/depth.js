// The depth workspace: the "Image Depth Maps" tutorial's four views and three effects (and a
// real lens), a focus slider that re-renders the preview while it moves, click to focus,
// mattes as overlays, the depth facts, full-size export.
//
// While a slider moves, one preview request is in flight at a time; the newest setting waits
// and every one in between is dropped (not queued). Each preview shown records how long it took
// from the input event whose value it shows to its load event, in window.studioTimings.
import { api, query, showError, showBlob, loadSliderSettings } from './api.js';
import { escapeHTML } from './burst.js';

window.studioTimings = [];

export class DepthWorkspace {
  constructor(root) {
    this.root = root;
    this.q = (id) => root.querySelector(`[data-testid=${id}]`);
    this.session = null;
    this.view = 'filtered';
    this.effect = 'spotlight';
    this.seq = 0;
    this.inFlight = false;
    this.pending = null;      // the input time of the newest setting not yet sent
    for (const group of root.querySelectorAll('.segmented')) {
      for (const b of group.querySelectorAll('button')) {
        b.addEventListener('click', () => {
          for (const o of group.querySelectorAll('button')) o.setAttribute('aria-pressed', String(o === b));
          this[group.dataset.group] = b.dataset.value;
          this.request(performance.now());
        });
      }
    }
    for (const name of ['focus', 'slope', 'width', 'radius']) {
      const input = this.q(`${name}-slider`);
      input.addEventListener('input', (ev) => {
        this.show(name, input.value);
        this.dragging = true;
        this.request(ev.timeStamp || performance.now());
      });
      // Released: the last preview again at full preview size if it was drawn smaller.
      input.addEventListener('change', () => {
        this.dragging = false;
        if (this.dragSize() < this.previewLongSide) this.request(performance.now());
      });
    }
    this.settingsLoaded = loadSliderSettings('/api/depth/settings', this.q, (name, value) => this.show(name, value))
      .catch((e) => showError(e.message));
    this.q('preview-image').addEventListener('click', (ev) => this.focusAt(ev));
    this.q('export-button').addEventListener('click', () => this.export());
  }

  /** A slider's value beside it, to the precision it is set with. */
  show(name, value) {
    const digits = name === 'focus' ? 3 : name === 'radius' ? 0 : 2;
    this.root.querySelector(`output[data-for=${name}]`).textContent = Number(value).toFixed(digits);
  }

  /** Long side of previews while a slider moves: the effects that cost more per pixel are
   * drawn smaller while dragging, so the preview keeps up with the hand. */
  dragSize() {
    const filtered = this.view === 'filtered';
    if (filtered && this.effect === 'lens') return 512;
    if (filtered && this.effect === 'blur') return 768;
    if (filtered) return Math.min(1024, this.previewLongSide || 1600);
    return this.previewLongSide || 1600;
  }

  params() {
    return {
      size: this.dragging ? this.dragSize() : (this.previewLongSide || 1600),
      view: this.view, effect: this.effect,
      focus: this.q('focus-slider').value, slope: this.q('slope-slider').value,
      width: this.q('width-slider').value, radius: this.q('radius-slider').value,
    };
  }

  async open(entry) {
    this.root.querySelector('.title').textContent = `Decoding ${entry.path}…`;
    await this.settingsLoaded;
    const o = await api('/api/depth/open', { method: 'POST', body: { root: entry.root, path: entry.path } });
    this.session = o.session;
    this.previewLongSide = Math.max(o.preview_width, o.preview_height);
    this.root.querySelector('.title').textContent =
      `${o.name}: ${o.width}×${o.height}, preview ${o.preview_width}×${o.preview_height}`;
    this.renderInfo(o);
    this.renderMattes(o.mattes);
    this.q('export-button').disabled = false;
    await this.request(performance.now());
  }

  renderInfo(o) {
    const d = o.depth.depth || {};
    const aux = (o.depth.auxiliary || []).map((a) => `${a.kind} ${a.width}×${a.height}`).join(', ') || 'none';
    const rows = [
      ['Photo', `${o.width}×${o.height} (${escapeHTML(o.depth.format || '')})`],
      ['Map', d.kind ? `${escapeHTML(d.kind)} ${d.width}×${d.height}, ${escapeHTML(d.stored_format || '')}` : 'none'],
      ['Units', escapeHTML(d.units || '')],
      ['Range', d.range ? d.range.map((v) => Number(v).toPrecision(4)).join(' … ') : ''],
      ['Accuracy', escapeHTML(d.accuracy || 'unknown')],
      ['Source', escapeHTML(d.source || '')],
      ['Holes', d.holes !== undefined ? String(d.holes) : ''],
      ['Calibration', d.calibration ? 'yes' : 'no'],
      ['Auxiliary', escapeHTML(aux)],
    ];
    const cells = rows.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join('');
    this.q('depth-info').innerHTML = `<table>${cells}</table>`;
  }

  renderMattes(mattes) {
    const box = this.q('matte-toggles');
    const overlays = this.root.querySelector('.overlays');
    box.replaceChildren();
    overlays.replaceChildren();
    if (!mattes.length) { box.textContent = 'No mattes in this file'; return; }
    box.append('Overlay: ');
    for (const kind of mattes) {
      const label = document.createElement('label');
      const cb = document.createElement('input');
      cb.type = 'checkbox';
      cb.setAttribute('data-testid', `matte-${kind}`);
      cb.addEventListener('change', () => {
        const existing = overlays.querySelector(`img.${kind}`);
        if (cb.checked && !existing) {
          const img = document.createElement('img');
          img.className = kind;
          img.src = `/api/depth/${this.session}/matte?kind=${kind}`;
          overlays.append(img);
        } else if (!cb.checked && existing) existing.remove();
      });
      label.append(cb, ` ${kind} `);
      box.append(label);
    }
  }

  /** Asks for a preview of the current settings: now if none is in flight, else after it (newest only). */
  request(inputTime) {
    if (!this.session) return Promise.resolve();
    if (this.inFlight) { this.pending = inputTime; return Promise.resolve(); }
    return this.send(inputTime);
  }

  async send(inputTime) {
    this.inFlight = true;
    const seq = ++this.seq;
    try {
      const params = this.params();
      const response = await api(`/api/depth/${this.session}/render?${query({ ...params, seq })}`, { raw: true });
      if (response.status === 200) {
        const serverMs = Number(response.headers.get('X-Render-Ms') || 0);
        await showBlob(this.q('preview-image'), await response.blob());
        const ms = performance.now() - inputTime;
        window.studioTimings.push({ ms, serverMs, seq, effect: this.effect, view: this.view, size: params.size });
        this.q('render-ms').textContent = `preview ${ms.toFixed(0)} ms (render ${serverMs.toFixed(0)} ms)`;
        this.root.dataset.rendered = String(seq);
      }
    } catch (err) {
      showError(err.message);
    } finally {
      this.inFlight = false;
    }
    if (this.pending !== null) {
      const t = this.pending;
      this.pending = null;
      await this.send(t);
    }
  }

  async focusAt(ev) {
    if (!this.session) return;
    const r = ev.target.getBoundingClientRect();
    const x = (ev.clientX - r.left) / r.width, y = (ev.clientY - r.top) / r.height;
    try {
      const f = await api(`/api/depth/${this.session}/focus-at?${query({ x: x.toFixed(4), y: y.toFixed(4) })}`);
      this.q('focus-slider').value = f.focus;
      this.root.querySelector('output[data-for=focus]').textContent = Number(f.focus).toFixed(3);
      await this.request(performance.now());
    } catch (err) { showError(err.message); }
  }

  export() {
    const p = { ...this.params(), format: this.q('export-format').value };
    const a = document.createElement('a');
    a.href = `/api/depth/${this.session}/export?${query(p)}`;
    a.download = '';
    document.body.append(a);
    a.click();
    a.remove();
  }
}

// The burst workspace: frames, reference, align/merge, stack with live progress and cancel,
// the result against the reference (split slider), 1:1 with pan, the per-pixel maps, downloads.
import { api, query, followJob, seconds, showError, setStatus, showBlob } from './api.js';

export class BurstWorkspace {
  constructor(root) {
    this.root = root;
    this.q = (id) => root.querySelector(`[data-testid=${id}]`);
    this.session = null;
    this.reference = 0;
    this.job = null;
    this.zoomed = false;
    // The align and merge choices, and their defaults, are the library's.
    this.choicesLoaded = api('/api/burst/settings').then((choices) => {
      for (const [name, { values, default_value: chosen }] of Object.entries(choices)) {
        const select = this.q(`${name}-select`);
        select.replaceChildren(...values.map((v) => new Option(v, v, v === chosen, v === chosen)));
        select.disabled = false;
      }
    }).catch((e) => showError(e));
    this.q('stack-button').addEventListener('click', () => this.stack());
    this.q('cancel-button').addEventListener('click', () => this.cancel());
    this.q('split-slider').addEventListener('input', () => this.split());
    this.q('map-select').addEventListener('change', () => this.showPictures());
    this.q('zoom-button').addEventListener('click', () => { this.zoomed = !this.zoomed; this.showPictures(); });
    this.q('erase-button').addEventListener('click', () => this.setErasing(!this.erasing));
    this.q('undo-button').addEventListener('click', () => this.undoStroke());
    this.erasing = false;
    this.setUpPan();
    this.setUpBrush();
  }

  async open(entry) {
    this.root.querySelector('.title').textContent = `Decoding ${entry.path}…`;
    this.clearResult();
    const opened = await api('/api/burst/open', { method: 'POST', body: { root: entry.root, path: entry.path } });
    this.session = opened.session;
    this.frames = opened.frames;
    this.reference = 0;
    this.root.querySelector('.title').textContent = `${opened.name}: ${opened.frames.length} frames`;
    if (opened.skipped.length) showError(opened.skipped.map((s) => `${s.name}: ${s.reason}`).join('\n'));
    this.renderStrip(null);
    this.q('stack-button').disabled = false;
  }

  clearResult() {
    for (const id of ['result-image', 'before-image']) { const img = this.q(id); img.removeAttribute('src'); }
    for (const id of ['download-jpeg', 'download-png16', 'download-tiff', 'download-dng']) {
      this.q(id).classList.add('disabled');
      this.q(id).removeAttribute('href');
    }
    this.q('zoom-button').disabled = true;
    this.setErasing(false);
    this.q('erase-button').disabled = true;
    this.q('undo-button').disabled = true;
    this.q('erase-status').textContent = '';
    this.q('map-legend').hidden = true;
    this.q('burst-report').textContent = '';
    this.q('stack-progress').textContent = '';
    this.q('stack-progress-bar').value = 0;
  }

  renderStrip(report) {
    const strip = this.q('frame-strip');
    strip.replaceChildren();
    for (const f of this.frames) {
      const r = report ? report.frames[f.index] : null;
      const el = document.createElement('div');
      el.className = 'frame';
      el.setAttribute('data-testid', 'frame-item');
      el.dataset.index = f.index;
      const img = document.createElement('img');
      img.src = `/api/burst/${this.session}/thumb?index=${f.index}`;
      img.alt = f.name;
      const name = document.createElement('div');
      name.className = 'name';
      name.textContent = f.name;
      name.title = f.name;
      const st = document.createElement('div'); st.className = 'state'; st.setAttribute('data-testid', 'frame-status');
      if (f.index === this.reference) { el.classList.add('reference'); st.textContent = 'reference'; }
      if (r && f.index !== this.reference) {
        if (r.used) {
          const hasResidual = r.residual !== undefined && r.residual !== null;
          const residual = hasResidual ? `, residual ${Number(r.residual).toFixed(2)}` : '';
          st.textContent = `${r.status}${residual}${r.local && r.local.used ? ', local' : ''}`;
        } else {
          el.classList.add('refused');
          st.textContent = `refused: ${r.reason || r.status}`;
          st.title = r.reason || '';
        }
      } else if (!r && f.index !== this.reference) {
        st.textContent = `${f.width}×${f.height}`;
      }
      el.append(img, name, st);
      el.title = 'Click to make this the reference frame';
      el.addEventListener('click', () => { this.reference = f.index; this.renderStrip(this.report); });
      strip.append(el);
    }
  }

  async stack() {
    showError(null);
    const pressed = performance.now();
    this.q('stack-button').disabled = true;
    this.q('cancel-button').disabled = false;
    this.q('stack-progress').textContent = 'starting…';
    try {
      await this.choicesLoaded;
      const { job } = await api(`/api/burst/${this.session}/stack`, {
        method: 'POST',
        body: { reference: this.reference, align: this.q('align-select').value, merge: this.q('merge-select').value },
      });
      this.job = job;
      let firstProgress = null;
      const end = await followJob(job, (type, e) => {
        if (type === 'queued') this.q('stack-progress').textContent = e.message || 'queued';
        if (type === 'started') this.q('stack-progress').textContent = 'started';
        if (type === 'progress') {
          if (firstProgress === null) {
            firstProgress = performance.now() - pressed;
            this.root.dataset.firstProgressMs = firstProgress.toFixed(0);
          }
          const left = e.remaining ? `, ${seconds(e.remaining)} left` : '';
          this.q('stack-progress').textContent = `${e.stage}: ${e.done}/${e.total}${left}`;
          const weights = { align: [0, 0.6], merge: [0.6, 0.4] };
          const [base, span] = weights[e.stage] || [0, 1];
          this.q('stack-progress-bar').value = base + span * (e.total ? e.done / e.total : 0);
        }
      });
      if (end.type === 'done') {
        this.q('stack-progress').textContent = 'done';
        this.q('stack-progress-bar').value = 1;
        await this.showResult();
      } else if (end.type === 'cancelled') {
        this.q('stack-progress').textContent = 'cancelled';
      } else {
        this.q('stack-progress').textContent = 'failed';
        showError(end.data.message);
      }
    } catch (err) {
      showError(err.message);
    } finally {
      this.job = null;
      this.q('stack-button').disabled = false;
      this.q('cancel-button').disabled = true;
    }
  }

  async cancel() {
    if (this.job) await api(`/api/jobs/${this.job}/cancel`, { method: 'POST' }).catch((e) => showError(e.message));
  }

  async showResult() {
    this.report = await api(`/api/burst/${this.session}/report`);
    this.reference = this.report.reference;
    this.renderStrip(this.report);
    const r = this.report;
    const notices = r.notices.length ? `<br>${r.notices.map((n) => escapeHTML(n)).join('<br>')}` : '';
    const took = r.times_s.total || ((r.times_s.align || 0) + (r.times_s.warp_merge || 0));
    const spilled = r.spilled_bytes
      ? `, frames kept in a temporary file (${(r.spilled_bytes / 1e9).toFixed(1)} GB) to stay within the memory limit`
      : '';
    this.q('burst-report').innerHTML =
      `${r.frames_used} of ${r.frames.length} frames merged (${escapeHTML(r.merge)}, align ${escapeHTML(r.align)}), `
      + `${r.width}×${r.height}, ${seconds(took)}` + spilled + notices;
    for (const [id, format] of [['download-jpeg', 'jpeg'], ['download-png16', 'png16'], ['download-tiff', 'tiff']]) {
      const a = this.q(id);
      a.href = `/api/burst/${this.session}/download?format=${format}`;
      a.classList.remove('disabled');
    }
    // A burst of camera raws: its merged mosaic, as a DNG.
    const dng = this.q('download-dng');
    dng.hidden = !r.dng;
    if (r.dng) {
      dng.href = `/api/burst/${this.session}/download?format=dng`;
      dng.classList.remove('disabled');
    }
    this.q('zoom-button').disabled = false;
    this.q('erase-button').disabled = false;
    this.q('undo-button').disabled = !r.strokes;
    await this.showPictures();
    setStatus(`stacked ${r.frames_used} frames`);
  }

  async showPictures() {
    if (!this.report) return;
    const which = this.q('map-select').value;
    const size = this.zoomed ? 'full' : 'preview';
    this.q('zoom-button').textContent = this.zoomed ? 'Fit' : '1:1';
    this.q('burst-viewer').classList.toggle('zoomed', this.zoomed);
    const get = async (w) =>
      (await api(`/api/burst/${this.session}/image?${query({ which: w, size })}`, { raw: true })).blob();
    try {
      const [after, before] = await Promise.all([get(which), get('reference')]);
      await Promise.all([showBlob(this.q('result-image'), after), showBlob(this.q('before-image'), before)]);
      this.split();
      const legend = this.q('map-legend');
      if (which === 'provenance') {
        await showBlob(legend, await get('legend'));
        legend.hidden = false;
      } else legend.hidden = true;
    } catch (err) { showError(err.message); }
  }

  /** The result on the right of the split, the reference frame on the left. */
  split() {
    const v = this.q('split-slider').value;
    this.q('result-image').style.clipPath = `inset(0 0 0 ${v}%)`;
  }

  /** The erase brush: on, the result takes strokes instead of pans (and shows whole, not split). */
  setErasing(on) {
    this.erasing = on;
    const button = this.q('erase-button');
    button.setAttribute('aria-pressed', String(on));
    button.textContent = on ? 'Erase brush: on' : 'Erase brush';
    this.q('brush-canvas').hidden = !on;
    if (on) {
      this.q('map-select').value = 'result';
      this.q('split-slider').value = 0;
      this.split();
      this.showPictures();
    }
  }

  /** Paint a stroke (a red trace at the brush's size); on release it is erased from the result. */
  setUpBrush() {
    const canvas = this.q('brush-canvas');
    let stroke = null;
    const scale = () => (this.report ? this.report.width / canvas.clientWidth : 1);
    const at = (ev) => {
      const r = canvas.getBoundingClientRect();
      return [(ev.clientX - r.left) * scale(), (ev.clientY - r.top) * scale()];
    };
    const draw = () => {
      const ctx = canvas.getContext('2d');
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      if (!stroke) return;
      const k = canvas.width / (this.report ? this.report.width : canvas.width);
      ctx.strokeStyle = ctx.fillStyle = 'rgba(255, 40, 40, 0.5)';
      ctx.lineWidth = 2 * stroke.radius * k; ctx.lineCap = ctx.lineJoin = 'round';
      ctx.beginPath();
      stroke.points.forEach(([x, y], i) => (i ? ctx.lineTo(x * k, y * k) : ctx.moveTo(x * k, y * k)));
      if (stroke.points.length === 1) {
        ctx.arc(stroke.points[0][0] * k, stroke.points[0][1] * k, stroke.radius * k, 0, 2 * Math.PI);
        ctx.fill();
      } else {
        ctx.stroke();
      }
    };
    canvas.addEventListener('pointerdown', (ev) => {
      if (!this.erasing || this.erasingNow) return;
      canvas.width = canvas.clientWidth; canvas.height = canvas.clientHeight;
      // The brush size is in screen pixels, as it is painted; the stroke is sent in the result's.
      stroke = { points: [at(ev)], radius: Number(this.q('brush-size').value) / 2 * scale() };
      canvas.setPointerCapture(ev.pointerId);
      draw();
    });
    canvas.addEventListener('pointermove', (ev) => {
      if (!stroke) return;
      const p = at(ev), last = stroke.points[stroke.points.length - 1];
      const tooClose = Math.hypot(p[0] - last[0], p[1] - last[1]) < Math.max(1, stroke.radius / 4);
      if (tooClose || stroke.points.length >= 2000) return;
      stroke.points.push(p);
      draw();
    });
    const release = () => { if (!stroke) return; const s = stroke; stroke = null; this.eraseStroke(s).finally(draw); };
    canvas.addEventListener('pointerup', release);
    canvas.addEventListener('pointercancel', () => { stroke = null; draw(); });
  }

  async eraseStroke(stroke) {
    showError(null);
    this.erasingNow = true;
    const pressed = performance.now();
    this.q('erase-status').textContent = 'erasing…';
    try {
      const r = await api(`/api/burst/${this.session}/erase`, { method: 'POST', body: stroke });
      await this.afterErase(r, pressed);
    } catch (err) {
      this.q('erase-status').textContent = '';
      showError(err.message);
    } finally { this.erasingNow = false; }
  }

  async undoStroke() {
    showError(null);
    const pressed = performance.now();
    try {
      await this.afterErase(await api(`/api/burst/${this.session}/erase/undo`, { method: 'POST' }), pressed);
    } catch (err) {
      showError(err.message);
    }
  }

  async afterErase(r, pressed) {
    this.report = await api(`/api/burst/${this.session}/report`);
    await this.showPictures();
    const shown = performance.now() - pressed;
    this.root.dataset.eraseShownMs = shown.toFixed(0);
    this.q('undo-button').disabled = !r.strokes;
    const e = r.erase;
    this.q('erase-status').textContent = !r.strokes ? 'no strokes: the merge as stacked'
      : `${r.strokes} stroke${r.strokes === 1 ? '' : 's'} erased: `
        + `${(100 * e.remerged_pixels / e.masked_pixels).toFixed(1)}% of ${e.masked_pixels} painted pixels changed, `
        + `from ${e.mean_frames.toFixed(1)} frames each (${seconds(r.seconds)}, shown after ${seconds(shown / 1000)})`;
    setStatus(`${r.strokes} erase stroke${r.strokes === 1 ? '' : 's'}`);
  }

  setUpPan() {
    const viewer = this.q('burst-viewer');
    let drag = null;
    viewer.addEventListener('pointerdown', (ev) => {
      if (!this.zoomed || this.erasing) return;
      drag = { x: ev.clientX, y: ev.clientY, l: viewer.scrollLeft, t: viewer.scrollTop };
      viewer.setPointerCapture(ev.pointerId);
    });
    viewer.addEventListener('pointermove', (ev) => {
      if (!drag) return;
      viewer.scrollLeft = drag.l - (ev.clientX - drag.x);
      viewer.scrollTop = drag.t - (ev.clientY - drag.y);
    });
    viewer.addEventListener('pointerup', () => { drag = null; });
  }
}

export function escapeHTML(s) {
  const entities = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
  return String(s).replace(/[&<>"']/g, (c) => entities[c]);
}

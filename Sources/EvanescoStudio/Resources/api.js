// The studio's API, from the page. The token travels in an HttpOnly cookie set on the first visit.

/** Shows the library's one-line error (or clears it with null). */
export function showError(message) {
  const box = document.querySelector('[data-testid=error-message]');
  box.textContent = message || '';
  box.hidden = !message;
}

export function setStatus(text) {
  document.querySelector('[data-testid=status]').textContent = text || '';
}

async function failure(response) {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body.error && body.error.message) message = body.error.message;
  } catch (_) { /* not JSON */ }
  const e = new Error(message);
  e.status = response.status;
  return e;
}

/** GET or POST JSON; throws an Error carrying the server's message. Every request carries
 * X-Evanesco-Request: a header no other page can send without a preflight, which the studio refuses. */
export async function api(path, { method = 'GET', body, raw = false, headers = {} } = {}) {
  const init = { method, headers: { 'X-Evanesco-Request': '1', ...headers }, credentials: 'same-origin' };
  if (body !== undefined) {
    if (body instanceof Blob) {
      init.body = body;
    } else {
      init.body = JSON.stringify(body);
      init.headers['Content-Type'] = 'application/json';
    }
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  return raw ? response : response.json();
}

/** Builds a query string from an object, leaving out null and undefined. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) q.set(k, String(v));
  return q.toString();
}

/** Follows a job's server-sent events until it ends. */
export function followJob(id, onEvent) {
  return new Promise((resolve) => {
    const source = new EventSource(`/api/jobs/${id}/events`);
    const handle = (type) => (ev) => {
      const data = ev.data ? JSON.parse(ev.data) : {};
      onEvent(type, data);
      if (type === 'done' || type === 'error' || type === 'cancelled') { source.close(); resolve({ type, data }); }
    };
    for (const t of ['queued', 'started', 'progress', 'done', 'error', 'cancelled']) {
      source.addEventListener(t, handle(t));
    }
    source.onerror = () => {
      if (source.readyState !== EventSource.CLOSED) return;
      resolve({ type: 'error', data: { message: 'the connection to the studio was lost' } });
    };
  });
}

export function seconds(s) {
  if (s === null || s === undefined || !isFinite(s)) return '';
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/** Replaces an image's source with a blob, releasing the previous one; resolves once it has loaded. */
export function showBlob(img, blob) {
  return new Promise((resolve, reject) => {
    const old = img.dataset.blob;
    const url = URL.createObjectURL(blob);
    img.onload = () => { if (old) URL.revokeObjectURL(old); resolve(); };
    img.onerror = () => reject(new Error('the preview could not be shown'));
    img.dataset.blob = url;
    img.src = url;
  });
}

/** Sets each slider `${field}-slider` from the library's settings at `url` (range, step and
 * default), enables it, and calls show(field, value). */
export async function loadSliderSettings(url, q, show) {
  for (const { field, setting } of await api(url)) {
    const input = q(`${field}-slider`);
    if (!input) continue;
    const span = setting.typical_maximum - setting.typical_minimum;
    input.min = setting.typical_minimum;
    input.max = setting.typical_maximum;
    input.step = setting.integer ? 1 : Math.pow(10, Math.floor(Math.log10(span / 1000)));
    input.value = setting.default_value;
    input.disabled = false;
    show(field, input.value);
  }
}

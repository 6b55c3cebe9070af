// The studio page: tabs, the file panel, uploads and drops, and the three workspaces.
import { api, showError, setStatus } from './api.js';
import { BurstWorkspace } from './burst.js';
import { DepthWorkspace } from './depth.js';
import { BackdropWorkspace } from './backdrop.js';

const state = { files: null, active: 'burst' };
const workspaces = {};

function selectWorkspace(name) {
  state.active = name;
  for (const tab of document.querySelectorAll('nav [role=tab]')) {
    tab.setAttribute('aria-selected', String(tab.dataset.workspace === name));
  }
  for (const ws of document.querySelectorAll('.workspace')) ws.hidden = ws.dataset.name !== name;
}

function entryLabel(e) {
  const name = e.path === '.' ? '(this folder)' : e.path;
  return e.kind === 'burst' ? `${name}/ · ${e.frames} frames` : name;
}

function renderFiles() {
  const list = document.querySelector('.file-list');
  list.replaceChildren();
  for (const root of state.files.roots) {
    const entries = state.files.entries.filter((e) => e.root === root.index);
    if (root.is_uploads && entries.length === 0) continue;
    const h = document.createElement('h3');
    h.textContent = root.is_uploads ? 'Uploaded' : root.name;
    list.append(h);
    if (entries.length === 0) {
      const p = document.createElement('p');
      p.className = 'hint';
      p.textContent = 'No images, folders of images or videos here.';
      list.append(p);
    }
    for (const e of entries) {
      const item = document.createElement('div');
      item.dataset.testid = 'file-item';
      item.setAttribute('data-testid', 'file-item');
      item.dataset.path = e.path;
      item.dataset.root = e.root;
      item.dataset.kind = e.kind;
      const kind = document.createElement('span'); kind.className = 'kind'; kind.textContent = e.kind;
      const label = document.createElement('span'); label.textContent = entryLabel(e);
      item.append(kind, label);
      item.addEventListener('click', () => openEntry(e, item));
      list.append(item);
    }
  }
  workspaces.backdrop.updateChoices(state.files);
}

async function openEntry(e, item) {
  showError(null);
  for (const el of document.querySelectorAll('[data-testid=file-item].active')) el.classList.remove('active');
  item.classList.add('active');
  try {
    if (e.kind === 'depth' && state.active === 'backdrop') {
      await workspaces.backdrop.openPhoto(e);
    } else if (e.kind === 'depth') {
      selectWorkspace('depth');
      await workspaces.depth.open(e);
    } else if (e.kind === 'burst' || e.kind === 'video') {
      selectWorkspace('burst');
      await workspaces.burst.open(e);
    } else if (state.active === 'backdrop') {
      workspaces.backdrop.useBackground(e);
    } else {
      setStatus(
        `${e.path}: a photo without depth; open it in Backdrop as a background, or a folder of frames in Burst`);
    }
  } catch (err) {
    showError(err.message);
  }
}

export async function refreshFiles() {
  state.files = await api('/api/files');
  renderFiles();
}

async function upload(files) {
  showError(null);
  const limit = state.files ? state.files.max_upload_bytes : Infinity;
  let added = 0;
  for (const f of files) {
    if (f.size > limit) {
      const mb = (n) => (n / 1048576).toFixed(0);
      showError(`${f.name} is ${mb(f.size)} MB; the studio takes uploads up to ${mb(limit)} MB`);
      continue;
    }
    setStatus(`uploading ${f.name}…`);
    try {
      await api(`/api/upload?name=${encodeURIComponent(f.name)}`, { method: 'POST', body: f });
      added += 1;
    } catch (err) {
      showError(err.message);
    }
  }
  setStatus(added ? `${added} file(s) uploaded` : '');
  await refreshFiles();
}

function setUpDrops() {
  const panel = document.querySelector('[data-testid=file-panel]');
  document.addEventListener('dragover', (ev) => { ev.preventDefault(); panel.classList.add('dropping'); });
  document.addEventListener('dragleave', () => panel.classList.remove('dropping'));
  document.addEventListener('drop', (ev) => {
    ev.preventDefault();
    panel.classList.remove('dropping');
    if (ev.dataTransfer && ev.dataTransfer.files.length) upload([...ev.dataTransfer.files]);
  });
  document.querySelector('[data-testid=upload-input]').addEventListener('change', (ev) => {
    upload([...ev.target.files]);
    ev.target.value = '';
  });
}

async function start() {
  // The token came in the URL on the first visit and is now a cookie: keep it out of the address bar.
  if (location.search.includes('token=')) history.replaceState(null, '', location.pathname);
  for (const tab of document.querySelectorAll('nav [role=tab]')) {
    tab.addEventListener('click', () => selectWorkspace(tab.dataset.workspace));
  }
  workspaces.burst = new BurstWorkspace(document.querySelector('[data-testid=workspace-burst]'));
  workspaces.depth = new DepthWorkspace(document.querySelector('[data-testid=workspace-depth]'));
  workspaces.backdrop = new BackdropWorkspace(document.querySelector('[data-testid=workspace-backdrop]'));
  setUpDrops();
  try {
    await refreshFiles();
    document.body.dataset.ready = 'true';
  } catch (err) {
    const needsToken = 'The studio needs its token: open the URL that `evanesco studio` printed.';
    showError(err.status === 401 ? needsToken : err.message);
    document.body.dataset.ready = 'error';
  }
}

start();

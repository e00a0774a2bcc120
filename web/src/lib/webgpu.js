// WebGPU availability, explained: which browser this is, what is missing and how to get it.
// Works in a Window and in a worker (no DOM use).

/** {name, version, os} from the user agent ("Chrome", "156", "Linux"). */
export function describeBrowser(ua = (typeof navigator !== 'undefined' ? navigator.userAgent : '')) {
  const pick = (re) => { const m = ua.match(re); return m ? m[1] : ''; };
  let name = 'this browser', version = '';
  if (/Edg\//.test(ua)) { name = 'Edge'; version = pick(/Edg\/(\d+)/); }
  else if (/Firefox\//.test(ua)) { name = 'Firefox'; version = pick(/Firefox\/(\d+)/); }
  else if (/(Chrome|Chromium|CriOS)\//.test(ua)) {
    name = /Chromium\//.test(ua) ? 'Chromium' : 'Chrome'; version = pick(/(?:Chrome|Chromium|CriOS)\/(\d+)/);
  } else if (/Safari\//.test(ua) && /Version\//.test(ua)) { name = 'Safari'; version = pick(/Version\/(\d+)/); }
  const os = /Android/.test(ua) ? 'Android' : /iPhone|iPad|iPod/.test(ua) ? 'iOS' : /Windows/.test(ua) ? 'Windows'
    : /Mac OS X|Macintosh/.test(ua) ? 'macOS' : /CrOS/.test(ua) ? 'ChromeOS' : /Linux/.test(ua) ? 'Linux' : '';
  return { name, version, os, label: `${name}${version ? ' ' + version : ''}${os ? ' on ' + os : ''}` };
}

const BROWSERS = 'WebGPU is in Chrome and Edge 113+ (Windows, macOS, ChromeOS; Android 12+ from 121), ' +
  'Safari 26+ (macOS, iOS and iPadOS 26) and Firefox 141+ on Windows.';

function howTo(b, missing) {
  const v = Number(b.version) || 0;
  if (b.name === 'Chrome' || b.name === 'Chromium' || b.name === 'Edge') {
    if (v && v < 113) return `update ${b.name} to version 113 or newer.`;
    if (b.os === 'Linux') {
      return `${b.name} on Linux has WebGPU behind a switch: start it with --enable-unsafe-webgpu ` +
        '(add --enable-features=Vulkan for a hardware GPU), or turn on chrome://flags/#enable-unsafe-webgpu and restart.';
    }
    if (missing === 'adapter') {
      return 'WebGPU may be blocklisted for this GPU or turned off: chrome://gpu says which; ' +
        'chrome://flags/#enable-unsafe-webgpu overrides the blocklist.';
    }
    return `update ${b.name}, or check chrome://gpu for why WebGPU is off.`;
  }
  if (b.name === 'Firefox') {
    return 'Firefox ships WebGPU on Windows from version 141; on other systems set dom.webgpu.enabled ' +
      'to true in about:config (or use Firefox Nightly), or use Chrome, Edge or Safari.';
  }
  if (b.name === 'Safari') {
    return v && v < 26 ? 'update to Safari 26 (macOS / iOS 26), or on Safari 18 turn on Develop ▸ Feature Flags ▸ WebGPU.'
      : 'check Settings ▸ Safari ▸ Advanced ▸ Feature Flags ▸ WebGPU.';
  }
  return 'use a browser with WebGPU.';
}

/** An Error for "no WebGPU here"; .support holds checkWebGPU()'s answer. */
export class NoWebGPUError extends Error {
  constructor(support) {
    super(`WebGPU is not available in ${support.browser.label}: ${support.missingText}. How to get it: ${support.howto}`);
    this.name = 'NoWebGPUError';
    this.support = support;
  }
}

/** Checks navigator.gpu and requests an adapter. -> {ok, browser, missing, missingText, howto, browsers}
 * missing: '' | 'secure-context' | 'navigator.gpu' | 'adapter'. Never throws. */
export async function checkWebGPU() {
  const browser = describeBrowser();
  const out = { ok: false, browser, missing: '', missingText: '', howto: '', browsers: BROWSERS };
  const g = typeof globalThis !== 'undefined' ? globalThis : self;
  if (g.isSecureContext === false) {
    out.missing = 'secure-context';
    out.missingText = 'WebGPU needs a secure context (https:// or http://localhost), and this page has none';
    out.howto = 'open the page over https or from localhost / 127.0.0.1.';
    return out;
  }
  const gpu = typeof navigator !== 'undefined' ? navigator.gpu : undefined;
  if (!gpu) {
    out.missing = 'navigator.gpu';
    out.missingText = 'the WebGPU API is missing (navigator.gpu is undefined)';
  } else {
    let adapter = null;
    try { adapter = await gpu.requestAdapter(); } catch (e) { out.error = String(e && e.message || e); }
    if (adapter) { out.ok = true; return out; }
    out.missing = 'adapter';
    out.missingText = 'the WebGPU API is there, but navigator.gpu.requestAdapter() found no GPU adapter ' +
      '(WebGPU is turned off, or this GPU is blocklisted)';
  }
  out.howto = howTo(browser, out.missing);
  return out;
}

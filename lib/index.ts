export { loadNative } from './native.js';

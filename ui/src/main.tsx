// Entry point: the styles, the theme before the first paint, and the app.
import { render } from 'preact';
import './styles.css';
import { App } from './app';
import { applyTheme, initialTheme } from './theme';

applyTheme(initialTheme(), false);
render(<App />, document.getElementById('app')!);

import { render } from 'preact';
import { App } from './app.tsx';
import './dashboard.css';

const root = document.getElementById('app')!;
root.textContent = ''; // the server's "Loading…" until the bundle runs
render(<App />, root);

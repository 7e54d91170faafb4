import { render } from 'preact';
import { App } from './app.tsx';
import './portal.css';

render(<App />, document.getElementById('app')!);

import './base.css';
import './vocabulary.css';
